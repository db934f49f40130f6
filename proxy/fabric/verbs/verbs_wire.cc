#include "proxy/fabric/verbs/verbs_wire.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "proxy/fabric/remote_key.h"

namespace railyard::fabric::verbs {

namespace {
constexpr uint8_t kAddrMagic[4] = {'R', 'Y', 'V', 'A'};
}

std::vector<uint8_t> VerbsAddress::Pack() const {
  std::vector<uint8_t> out(kBytes, 0);
  std::memcpy(out.data(), kAddrMagic, 4);
  std::memcpy(out.data() + 4, &kVersion, 2);
  std::memcpy(out.data() + 6, &rails, 2);
  std::memcpy(out.data() + 8, &workerId, 8);
  std::memcpy(out.data() + 16, &ipv4, 4);
  std::memcpy(out.data() + 20, &port, 2);
  return out;
}

Status VerbsAddress::Unpack(std::span<const uint8_t> bytes, VerbsAddress* out) {
  if (bytes.size() != kBytes) {
    return InvalidArgument("verbs worker address of " + std::to_string(bytes.size()) + " bytes, expected " +
                           std::to_string(kBytes));
  }
  if (std::memcmp(bytes.data(), kAddrMagic, 4) != 0) {
    return InvalidArgument("not a verbs worker address (bad magic; a TCP worker's address?)");
  }
  VerbsAddress a;
  uint16_t version = 0;
  std::memcpy(&version, bytes.data() + 4, 2);
  std::memcpy(&a.rails, bytes.data() + 6, 2);
  std::memcpy(&a.workerId, bytes.data() + 8, 8);
  std::memcpy(&a.ipv4, bytes.data() + 16, 4);
  std::memcpy(&a.port, bytes.data() + 20, 2);
  if (version != kVersion) {
    return InvalidArgument("verbs worker address version " + std::to_string(version) + ", this Railyard speaks " +
                           std::to_string(kVersion));
  }
  if (a.rails == 0 || a.rails > RemoteKey::kMaxRails) {
    return InvalidArgument("verbs worker address with " + std::to_string(a.rails) + " rails (1..16)");
  }
  if (a.workerId == 0) return InvalidArgument("verbs worker address with worker id 0");
  if (a.port == 0) return InvalidArgument("verbs worker address with port 0");
  // The reserved u16 must be zero, as in the TCP Worker address: a field this side
  // skips would otherwise pass unseen (found by the fuzz target verbs_wire).
  uint16_t reserved = 0;
  std::memcpy(&reserved, bytes.data() + 22, 2);
  if (reserved != 0) return InvalidArgument("verbs worker address with reserved bytes set");
  *out = a;
  return Status::Ok();
}

std::string VerbsAddress::Name() const {
  char ip[INET_ADDRSTRLEN] = {};
  in_addr in{};
  in.s_addr = ipv4;
  inet_ntop(AF_INET, &in, ip, sizeof ip);
  char buf[96];
  std::snprintf(buf, sizeof buf, "w=%016llx %s:%u", static_cast<unsigned long long>(workerId), ip, port);
  return buf;
}

Status CheckHello(const VerbsHello& h, uint16_t expectRole) {
  if (h.magic != VerbsHello::kMagic) return InvalidArgument("verbs hello: bad magic (not a Railyard verbs worker)");
  if (h.version != VerbsHello::kVersion) {
    return InvalidArgument("verbs hello version " + std::to_string(h.version) + ", this Railyard speaks " +
                           std::to_string(VerbsHello::kVersion));
  }
  if (h.role != expectRole) return InvalidArgument("verbs hello with role " + std::to_string(h.role));
  if (h.workerId == 0) return InvalidArgument("verbs hello with worker id 0");
  if (expectRole == VerbsHello::kRoleAccept) {
    if (h.recordCredits < 4 || h.recordCredits > 4096) {
      return InvalidArgument("verbs hello with " + std::to_string(h.recordCredits) + " record credits (4..4096)");
    }
    if (h.recordBytes == 0 || h.recordBytes > 65536) {
      return InvalidArgument("verbs hello with record buffers of " + std::to_string(h.recordBytes) + " bytes");
    }
  } else if (h.creditAddr == 0) {
    return InvalidArgument("verbs hello with credit address 0");
  }
  return Status::Ok();
}

std::vector<uint8_t> WriteSizeRecord::Pack() const {
  std::vector<uint8_t> out(kBytes, 0);
  std::memcpy(out.data(), &kMagic, 4);
  std::memcpy(out.data() + 8, &bytes, 8);
  return out;
}

Status WriteSizeRecord::Unpack(std::span<const uint8_t> data, uint64_t maxBytes, WriteSizeRecord* out) {
  if (data.size() != kBytes) {
    return InvalidArgument("verbs write-size record of " + std::to_string(data.size()) + " bytes, expected " +
                           std::to_string(kBytes));
  }
  uint32_t magic = 0, reserved = 0;
  uint64_t bytes = 0;
  std::memcpy(&magic, data.data(), 4);
  std::memcpy(&reserved, data.data() + 4, 4);
  std::memcpy(&bytes, data.data() + 8, 8);
  if (magic != kMagic) return InvalidArgument("verbs write-size record: bad magic");
  if (reserved != 0) return InvalidArgument("verbs write-size record with reserved bytes set");
  if (bytes > maxBytes) {
    return InvalidArgument("verbs write-size record names a Write of " + std::to_string(bytes) + " bytes (at most " +
                           std::to_string(maxBytes) + ")");
  }
  out->bytes = bytes;
  return Status::Ok();
}

}  // namespace railyard::fabric::verbs
