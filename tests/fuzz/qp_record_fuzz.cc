// Fuzz target `qp_record`: the verbs QP record set a peer sends on the control
// socket before any QP is modified (proxy/verbs/qp_record.h), read as the verbs
// connector and listener read it: RecordReader::Read (proxy/verbs/verbs_setup.h)
// over a socketpair, which frames it with QpSetLength, then DecodeQpSet on the
// bytes it collected. Input: byte 0 picks expectedQps (0 = any, as the listener;
// else 1..128, as the connector), the rest is what the peer sends (then it closes).
// Checks: the reader ends with a whole record or an error with a message, never
// holding more than the record announces; a decoded set respects every bound
// DecodeQpSet documents and re-encodes to a set that decodes the same; a refusal
// carries a message.
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "proxy/verbs/link_params.h"
#include "proxy/verbs/qp_record.h"
#include "proxy/verbs/verbs_setup.h"
#include "tests/fuzz/fuzz_target.h"

namespace v = railyard::proxy::verbs;

namespace {
/// Reads one record the way the verbs handshake does; false on a refusal.
bool ReadRecord(const uint8_t* data, size_t size, std::vector<char>* out) {
  int fds[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  int buf = 1 << 20;
  (void)setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  FUZZ_CHECK(size == 0 || ::send(fds[0], data, size, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(size));
  ::shutdown(fds[0], SHUT_WR);
  v::RecordReader reader;
  bool done = false;
  railyard::Status s;
  for (int pass = 0; pass < 16 && !done && s.ok(); ++pass) s = reader.Read(fds[1], "fuzzer/127.0.0.1:1", &done);
  ::close(fds[0]);
  ::close(fds[1]);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(done);  // the peer closed: the reader has a record or an error
  FUZZ_CHECK(reader.bytes().size() <= size);
  *out = reader.bytes();
  return true;
}
}  // namespace

RAILYARD_FUZZ_TARGET(QpRecord) {
  if (size < 1) return false;
  const int expectedQps = data[0] % (v::kMaxConnQps + 1);
  if (size > 8192) return false;
  std::vector<char> bytes;
  if (!ReadRecord(data + 1, size - 1, &bytes)) return false;
  const char* rec = bytes.data();
  const size_t n = bytes.size();
  v::QpSet set;
  const railyard::Status s = v::DecodeQpSet(rec, n, expectedQps, &set);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(!set.rails.empty() && set.rails.size() <= static_cast<size_t>(v::kMaxConnRails));
  FUZZ_CHECK(!set.qps.empty() && set.qps.size() <= static_cast<size_t>(v::kMaxConnQps));
  FUZZ_CHECK(expectedQps == 0 || set.qps.size() == static_cast<size_t>(expectedQps));
  for (const v::QpRailWire& r : set.rails) {
    FUZZ_CHECK(v::IbMtuFromEnum(r.mtu).has_value());
    FUZZ_CHECK(r.device[sizeof r.device - 1] == '\0');
    FUZZ_CHECK(!v::RailName(r).empty());
  }
  for (const v::QpWire& q : set.qps) FUZZ_CHECK(q.rail < set.rails.size() && q.qpn != 0);
  FUZZ_CHECK(v::QpSetBytes(set) == n);
  const std::vector<char> again = v::EncodeQpSet(set);
  v::QpSet back;
  FUZZ_CHECK(v::DecodeQpSet(again.data(), again.size(), expectedQps, &back).ok());
  FUZZ_CHECK(back.qps.size() == set.qps.size() && back.rails.size() == set.rails.size() &&
             back.fifoAddr == set.fifoAddr && back.ringAddr == set.ringAddr &&
             back.ringEntries == set.ringEntries && back.trafficClass == set.trafficClass);
  return true;
}
