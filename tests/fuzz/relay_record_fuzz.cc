// Fuzz target `relay_record`: the RelayRecord at the start of every socket a
// relay accepts, handled as RelayService does: CheckRelayRecord
// (proxy/relay/relay_service.h), then Router::PlanSocket for the next leg with
// the record's destination, port, socket index, hops and origin. The router is
// a real one on no rails (its graph holds only this host), so a plan exists only
// for this host itself. Input: a RelayRecord (56 bytes, zero-padded); a destHost
// of 1 is replaced by this host's id (which the fuzzer cannot guess). Checks: a
// refusal carries a message; originName is NUL-terminated after the check; a
// plan has an address to connect to and its prefix, if any, is a relay record
// that passes CheckRelayRecord itself with hops + 1.
#include <memory>

#include "proxy/relay/relay_service.h"
#include "proxy/routing/router.h"
#include "tests/fuzz/fuzz_target.h"

namespace p = railyard::proxy;

namespace {
const p::Router& TheRouter() {
  static std::unique_ptr<p::Router> router = [] {
    std::unique_ptr<p::Router> r;
    p::RouterOptions o;
    o.hostName = "fuzz-relay";
    FUZZ_CHECK(p::Router::Start({}, o, &r).ok());
    return r;
  }();
  return *router;
}
}  // namespace

RAILYARD_FUZZ_TARGET(RelayRecord) {
  p::RelayRecord rec;
  Input(data, size).Bytes(&rec, sizeof rec);
  const p::Router& router = TheRouter();
  if (rec.destHost == 1) rec.destHost = router.HostId();
  railyard::Status s = p::CheckRelayRecord(&rec);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(rec.originName[sizeof rec.originName - 1] == '\0');
  p::SocketTarget t;
  bool ready = false;
  s = router.PlanSocket(rec.destHost, rec.destPort, rec.sockIndex, rec.hops + 1, rec.originName, rec.originHost,
                        &t, &ready);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  if (!ready) return false;  // no route: the relay refuses the socket
  FUZZ_CHECK(t.remote.ss_family == AF_INET && t.remoteLen == sizeof(sockaddr_in));
  if (!t.prefix.empty()) {
    FUZZ_CHECK(t.prefix.size() == sizeof(p::RelayRecord));
    p::RelayRecord next;
    std::memcpy(&next, t.prefix.data(), sizeof next);
    FUZZ_CHECK(p::CheckRelayRecord(&next).ok());
    FUZZ_CHECK(next.hops == rec.hops + 1);
  }
  return true;
}
