// Fuzz target `qp_record`: the verbs QP record set a peer sends on the control
// socket before any QP is modified (proxy/verbs/qp_record.h), read the way
// RecordReader does: QpSetLength on the first 40 bytes, then DecodeQpSet on the
// bytes it announces. Input: byte 0 picks expectedQps (0 = any, else 1..128), the
// rest is the record. Checks: the announced length is in range and never exceeds
// what was read; a decoded set respects every bound DecodeQpSet documents and
// re-encodes to the same bytes; a refusal carries a message.
#include <vector>

#include "proxy/verbs/link_params.h"
#include "proxy/verbs/qp_record.h"
#include "tests/fuzz/fuzz_target.h"

namespace v = railyard::proxy::verbs;

RAILYARD_FUZZ_TARGET(QpRecord) {
  if (size < 1) return false;
  const int expectedQps = data[0] % (v::kMaxConnQps + 1);
  const uint8_t* rec = data + 1;
  const size_t n = size - 1;
  uint32_t bytes = 0;
  railyard::Status s = v::QpSetLength(rec, n, &bytes);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(bytes >= sizeof(v::QpSetHeader));
  FUZZ_CHECK(bytes <= sizeof(v::QpSetHeader) + v::kMaxConnRails * sizeof(v::QpRailWire) +
                          v::kMaxConnQps * sizeof(v::QpWire));
  v::QpSet set;
  s = v::DecodeQpSet(rec, n, expectedQps, &set);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(bytes <= n);
  FUZZ_CHECK(!set.rails.empty() && set.rails.size() <= static_cast<size_t>(v::kMaxConnRails));
  FUZZ_CHECK(!set.qps.empty() && set.qps.size() <= static_cast<size_t>(v::kMaxConnQps));
  FUZZ_CHECK(expectedQps == 0 || set.qps.size() == static_cast<size_t>(expectedQps));
  for (const v::QpRailWire& r : set.rails) {
    FUZZ_CHECK(v::IbMtuFromEnum(r.mtu).has_value());
    FUZZ_CHECK(r.device[sizeof r.device - 1] == '\0');
    FUZZ_CHECK(!v::RailName(r).empty());
  }
  for (const v::QpWire& q : set.qps) FUZZ_CHECK(q.rail < set.rails.size() && q.qpn != 0);
  FUZZ_CHECK(v::QpSetBytes(set) == bytes);
  const std::vector<char> again = v::EncodeQpSet(set);
  v::QpSet back;
  FUZZ_CHECK(v::DecodeQpSet(again.data(), again.size(), expectedQps, &back).ok());
  FUZZ_CHECK(back.qps.size() == set.qps.size() && back.rails.size() == set.rails.size() &&
             back.fifoAddr == set.fifoAddr && back.ringAddr == set.ringAddr &&
             back.ringEntries == set.ringEntries && back.trafficClass == set.trafficClass);
  return true;
}
