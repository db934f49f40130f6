// runtime::NetRuntime over the older TCP comms (RAILYARD_COMMS=legacy, loopback): two
// communicators in one process, and a receive of one of them that makes no progress
// names THAT communicator's rank, not the rank of whichever communicator sent last
// (the old process-wide guess, proxy::LocalRank).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "proxy/runtime/net_runtime.h"
#include "tests/runtime/net_runtime_pairs.h"

namespace railyard::runtime {
namespace {

TEST(NetRuntimeLegacy, AStalledReceiveNamesTheRankOfItsOwnCommunicator) {
  ::setenv("RAILYARD_SOCKET_IFNAME", "=lo", 1);
  ::setenv("RAILYARD_TRANSPORT", "tcp", 1);
  ::setenv("RAILYARD_FABRIC", "off", 1);
  ::setenv("RAILYARD_COMMS", "legacy", 1);
  ::setenv("RAILYARD_TIMEOUT_MS", "300", 1);
  NetRuntime& rt = NetRuntime::Process();
  CommContext *a = nullptr, *b = nullptr;
  ASSERT_TRUE(rt.Open(1, -1, &a).ok());
  ASSERT_TRUE(rt.Open(2, -1, &b).ok());
  ASSERT_FALSE(rt.UsesFabricComms()) << "RAILYARD_COMMS=legacy: the older TCP comms";
  proxy::ListenComm *la = nullptr, *lb = nullptr;
  proxy::SendComm *sa = nullptr, *sb = nullptr;
  proxy::RecvComm *ra = nullptr, *rb = nullptr;
  Pair(a, &la, &sa, &ra);
  Pair(b, &lb, &sb, &rb);
  SendOnce(sa, ra, 3);  // this process is rank 3 in communicator a ...
  SendOnce(sb, rb, 7);  // ... and rank 7 in b, whose send went last
  EXPECT_EQ(a->rank->Get(), 3);
  EXPECT_EQ(b->rank->Get(), 7);
  EXPECT_EQ(proxy::LocalRank(), 7) << "the process-wide guess is b's";

  // A receive on a's comm from rank 5, which never sends: it fails after
  // RAILYARD_TIMEOUT_MS naming a's rank.
  std::vector<char> dst(64, 0);
  void* mh = nullptr;
  ASSERT_TRUE(rt.RegisterMemory(dst.data(), dst.size(), kPtrHost, fabric::MemoryKind::kHost, &mh).ok());
  void* data[1] = {dst.data()};
  size_t sizes[1] = {dst.size()};
  int tags[1] = {5};
  void* mhs[1] = {mh};
  proxy::Request* r = nullptr;
  ASSERT_TRUE(IrecvOn(ra, 1, data, sizes, tags, mhs, &r).ok());
  ASSERT_NE(r, nullptr);
  Status s;
  int done = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.ok() && done == 0 && std::chrono::steady_clock::now() < until) s = r->owner->Test(r, &done, nullptr);
  ASSERT_FALSE(s.ok()) << "the receive from a rank that never sends must fail";
  EXPECT_NE(s.message().find("rank 3 from rank 5"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("rank 7"), std::string::npos) << s.message();
  EXPECT_TRUE(rt.Deregister(mh).ok());
  EXPECT_TRUE(rt.Close(a));
  EXPECT_TRUE(rt.Close(b));
  EXPECT_FALSE(rt.Running());
}

}  // namespace
}  // namespace railyard::runtime
