// Fuzz target `relay_record`: the head of every socket a relay accepts, handled as
// RelayService does (proxy/relay/relay_service.cc): CheckRelayRecordHeader on the
// 56-byte RelayRecord; then, as its flags say, a 32-byte MAC; then the header of
// the record that must follow. CheckRelayMac without a cluster key (a record that
// says it carries a MAC is refused) and with a fixed test key (the seeds' key:
// tests/fuzz/fuzz_seeds.cc kFuzzClusterSecret), originName NUL-terminated,
// CheckRelayRecord against a scope whose graph holds this host and host 2, and
// CheckFollowingHello; then Router::PlanSocket for the next leg. The router is a
// real one on no rails, so no plan is ever ready (the relay refuses the socket).
// Input: record, [MAC], RecordHeader (zero-padded); a destHost of 1 is replaced by
// this host's id (which the fuzzer cannot guess). Checks: every refusal carries a
// message; a record that passes the unkeyed check has no MAC flag; a record that
// passes the policy goes to another host of the graph, with hops below the limit;
// originName is NUL-terminated; a ready plan has an IPv4 address to connect to.
#include <memory>

#include "proxy/relay/relay_policy.h"
#include "proxy/relay/relay_service.h"
#include "proxy/routing/router.h"
#include "tests/fuzz/fuzz_target.h"
#include "topology/cluster_key.h"

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

const railyard::topology::ClusterKey* TheKey() {
  static std::shared_ptr<const railyard::topology::ClusterKey> key = [] {
    std::shared_ptr<const railyard::topology::ClusterKey> k;
    FUZZ_CHECK(railyard::topology::ClusterKey::FromSecret("railyard-fuzz-cluster-key-0123456789abcdef", &k).ok());
    return k;
  }();
  return key.get();
}
}  // namespace

RAILYARD_FUZZ_TARGET(RelayRecord) {
  Input in(data, size);
  p::RelayRecord rec;
  in.Bytes(&rec, sizeof rec);
  const p::Router& router = TheRouter();
  if (rec.destHost == 1) rec.destHost = router.HostId();
  railyard::Status s = p::CheckRelayRecordHeader(rec);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  unsigned char mac[p::kRelayMacBytes];
  const bool hasMac = (rec.flags & p::kRelayFlagMac) != 0;
  if (hasMac) in.Bytes(mac, sizeof mac);
  p::RecordHeader hello;
  in.Bytes(&hello, sizeof hello);
  const railyard::Status keyed = p::CheckRelayMac(rec, hasMac ? mac : nullptr, TheKey());
  if (!keyed.ok()) FUZZ_CHECK_REFUSAL(keyed);
  if (!hasMac) FUZZ_CHECK(!keyed.ok());  // with a key, a record without a MAC never passes
  s = p::CheckRelayMac(rec, hasMac ? mac : nullptr, nullptr);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(hasMac);
    if (!keyed.ok()) return false;
  } else {
    FUZZ_CHECK(!hasMac);
  }
  rec.originName[sizeof rec.originName - 1] = '\0';
  p::RelayScope scope;
  scope.selfHost = router.HostId();
  scope.graphHosts = {router.HostId(), 2};
  scope.relayPort = router.RelayPort();
  s = p::CheckRelayRecord(rec, scope);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(rec.destHost == 2 && rec.destPort != 0 && rec.destPort != scope.relayPort);
  FUZZ_CHECK(rec.hops < p::kMaxRelayHops);
  s = p::CheckFollowingHello(hello);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
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
  return true;
}
