// The cabling agent never says hello on a port that carries a default route unless the rail
// says the user named it exactly (issue 8.2, defence in depth behind SelectFabricRails).
// Runs in a fresh network namespace (needs root; skipped otherwise) with a dummy uplink.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "topology/cabling_agent.h"
#include "topology/netdev.h"

namespace railyard::topology {
namespace {

/// In a child in its own network namespace: an uplink "up0" (10.99.0.1/24, default route) and
/// a cable "p0" (10.98.0.1/24), each a veth pair; starts an agent on `rail` and returns its exit status:
/// 0 started, 10 refused naming the default route, 20 other failure, 77 no namespace.
int StartAgentInFreshNetns(const char* rail, bool namedUplink) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(77);
    const int rc = std::system(
        "ip link set lo up && ip link add up0 type veth peer name up0p && "
        "ip link add p0 type veth peer name p0p && ip addr add 10.99.0.1/24 dev up0 && "
        "ip addr add 10.98.0.1/24 dev p0 && ip link set up0 up && ip link set up0p up && "
        "ip link set p0 up && ip link set p0p up && ip route add default via 10.99.0.2 dev up0");
    if (rc != 0) _exit(77);
    if (DefaultRouteInterfaces().count("up0") != 1) _exit(20);
    AgentRail r;
    r.ifname = rail;
    inet_pton(AF_INET, std::string(rail) == "up0" ? "10.99.0.1" : "10.98.0.1", &r.addr);
    r.speedMbps = 10000;
    r.mac = "02:00:00:00:00:01";
    r.namedUplink = namedUplink;
    std::unique_ptr<CablingAgent> agent;
    AgentOptions o;
    o.port = 29999;
    Status s = CablingAgent::Start("h0", {r}, o, &agent, 42);
    if (s.ok()) _exit(0);
    _exit(s.message().find("carries a default route") != std::string::npos ? 10 : 20);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(UplinkGuard, AgentRefusesADefaultRoutePortUnlessNamedExactly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace";
  const int uplink = StartAgentInFreshNetns("up0", false);
  if (uplink == 77) GTEST_SKIP() << "cannot build a network namespace here";
  EXPECT_EQ(uplink, 10) << "the agent took a default-route port that nobody named";
  EXPECT_EQ(StartAgentInFreshNetns("up0", true), 0) << "a named uplink must be allowed (with the WARN upstream)";
  EXPECT_EQ(StartAgentInFreshNetns("p0", false), 0) << "a port without the default route is a rail";
}

}  // namespace
}  // namespace railyard::topology
