#include "proxy/verbs/qp_record.h"

#include <cstring>

#include "proxy/verbs/link_params.h"

namespace railyard::proxy::verbs {

size_t QpSetBytes(const QpSet& set) {
  return sizeof(QpSetHeader) + set.rails.size() * sizeof(QpRailWire) +
         set.qps.size() * sizeof(QpWire);
}

std::vector<char> EncodeQpSet(const QpSet& set) {
  QpSetHeader h{};
  h.header = MakeHeader(static_cast<RecordKind>(kKindQpSet));
  h.qpVersion = kQpRecordVersion;
  h.nrails = static_cast<uint16_t>(set.rails.size());
  h.nqps = static_cast<uint16_t>(set.qps.size());
  h.trafficClass = set.trafficClass;
  h.serviceLevel = set.serviceLevel;
  h.bytes = static_cast<uint32_t>(QpSetBytes(set));
  h.ringEntries = set.ringEntries;
  h.fifoAddr = set.fifoAddr;
  h.ringAddr = set.ringAddr;
  std::vector<char> out(h.bytes);
  char* p = out.data();
  std::memcpy(p, &h, sizeof h);
  p += sizeof h;
  if (!set.rails.empty()) std::memcpy(p, set.rails.data(), set.rails.size() * sizeof(QpRailWire));
  p += set.rails.size() * sizeof(QpRailWire);
  if (!set.qps.empty()) std::memcpy(p, set.qps.data(), set.qps.size() * sizeof(QpWire));
  return out;
}

Status QpSetLength(const void* data, size_t have, uint32_t* bytes) {
  if (have < sizeof(QpSetHeader)) {
    return InvalidUsage("truncated QP record: " + std::to_string(have) + " bytes, the header alone is " +
                        std::to_string(sizeof(QpSetHeader)));
  }
  QpSetHeader h;
  std::memcpy(&h, data, sizeof h);
  RY_RETURN_IF_ERROR(CheckHeader(h.header, "QP record"));
  if (h.header.kind != kKindQpSet) {
    return InvalidUsage("QP record has kind " + std::to_string(h.header.kind) + ", expected " +
                        std::to_string(kKindQpSet) + " (a QP record set)");
  }
  if (h.qpVersion != kQpRecordVersion) {
    return InvalidUsage("QP record version " + std::to_string(h.qpVersion) +
                        ", this Railyard speaks version " + std::to_string(kQpRecordVersion) +
                        " (run the same Railyard on every host)");
  }
  const size_t most = sizeof(QpSetHeader) + kMaxConnRails * sizeof(QpRailWire) +
                      kMaxConnQps * sizeof(QpWire);
  if (h.bytes < sizeof(QpSetHeader) || h.bytes > most) {
    return InvalidUsage("QP record announces " + std::to_string(h.bytes) + " bytes, expected " +
                        std::to_string(sizeof(QpSetHeader)) + ".." + std::to_string(most));
  }
  *bytes = h.bytes;
  return Status::Ok();
}

Status DecodeQpSet(const void* data, size_t size, int expectedQps, QpSet* out) {
  uint32_t bytes = 0;
  RY_RETURN_IF_ERROR(QpSetLength(data, size, &bytes));
  QpSetHeader h;
  std::memcpy(&h, data, sizeof h);
  if (size < bytes) {
    return InvalidUsage("truncated QP record: " + std::to_string(size) + " of the " +
                        std::to_string(bytes) + " bytes it announces");
  }
  if (h.nrails < 1 || h.nrails > kMaxConnRails) {
    return InvalidUsage("QP record lists " + std::to_string(h.nrails) + " rails, expected 1.." +
                        std::to_string(kMaxConnRails));
  }
  if (h.nqps < 1 || h.nqps > kMaxConnQps) {
    return InvalidUsage("QP record lists " + std::to_string(h.nqps) + " QPs, expected 1.." +
                        std::to_string(kMaxConnQps));
  }
  const size_t need = sizeof(QpSetHeader) + h.nrails * sizeof(QpRailWire) + h.nqps * sizeof(QpWire);
  if (bytes != need) {
    return InvalidUsage("QP record of " + std::to_string(bytes) + " bytes does not match its " +
                        std::to_string(h.nrails) + " rails and " + std::to_string(h.nqps) +
                        " QPs (" + std::to_string(need) + " bytes)");
  }
  if (expectedQps > 0 && h.nqps != expectedQps) {
    return InvalidUsage("QP record set covers " + std::to_string(h.nqps) + " QPs, the connection has " +
                        std::to_string(expectedQps));
  }
  QpSet s;
  s.trafficClass = h.trafficClass;
  s.serviceLevel = h.serviceLevel;
  s.ringEntries = h.ringEntries;
  s.fifoAddr = h.fifoAddr;
  s.ringAddr = h.ringAddr;
  s.rails.resize(h.nrails);
  s.qps.resize(h.nqps);
  const char* p = static_cast<const char*>(data) + sizeof h;
  std::memcpy(s.rails.data(), p, s.rails.size() * sizeof(QpRailWire));
  p += s.rails.size() * sizeof(QpRailWire);
  std::memcpy(s.qps.data(), p, s.qps.size() * sizeof(QpWire));
  for (QpRailWire& r : s.rails) {
    r.device[sizeof r.device - 1] = '\0';
    if (!IbMtuFromEnum(r.mtu)) {
      return InvalidUsage("QP record gives rail " + RailName(r) + " MTU enum " + std::to_string(r.mtu) +
                          ", expected 1..5 (256..4096 bytes)");
    }
  }
  for (size_t i = 0; i < s.qps.size(); ++i) {
    const QpWire& q = s.qps[i];
    if (q.rail >= h.nrails) {
      return InvalidUsage("QP record: QP " + std::to_string(i) + " names rail " + std::to_string(q.rail) +
                          " of " + std::to_string(h.nrails));
    }
    if (q.qpn == 0) return InvalidUsage("QP record: QP " + std::to_string(i) + " has QP number 0");
  }
  *out = std::move(s);
  return Status::Ok();
}

std::string RailName(const QpRailWire& rail) {
  return std::string(rail.device, strnlen(rail.device, sizeof rail.device)) + ":" +
         std::to_string(rail.port);
}

}  // namespace railyard::proxy::verbs
