#include "proxy/wire.h"

#include <cstdio>
#include <cstring>

namespace railyard::proxy {

Status CheckHeader(const RecordHeader& h, const char* what) {
  if (h.magic != kMagic) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%s is not a Railyard record (magic 0x%08x, expected 0x%08x): it comes from "
                  "another plugin or is corrupt",
                  what, h.magic, kMagic);
    return InvalidUsage(buf);
  }
  if (h.version != kProtocolVersion) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%s has Railyard protocol version %u, this library speaks version %u: mixed "
                  "Railyard versions in one job",
                  what, unsigned{h.version}, unsigned{kProtocolVersion});
    return InvalidUsage(buf);
  }
  return Status::Ok();
}

RecordHeader MakeHeader(RecordKind kind) {
  return RecordHeader{kMagic, kProtocolVersion, static_cast<uint16_t>(kind)};
}

void CopyHostName(const std::string& host, char (&out)[32]) {
  std::memset(out, 0, sizeof out);
  std::memcpy(out, host.data(), std::min(host.size(), sizeof out - 1));
}

}  // namespace railyard::proxy
