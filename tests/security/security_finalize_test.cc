// Security: test() of a request whose comm finalize closed must fail cleanly
// (today's misuse read freed memory). Through ncclNetPlugin_v11, as NCCL calls it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tests/conformance/harness.h"

namespace railyard::security {
namespace {

using conformance::Buffer;
using conformance::CapturedWarnings;
using conformance::Clock;
using conformance::FindWarning;
using conformance::Ms;
using conformance::Rank;
using conformance::RunOptions;
using conformance::RunRanks;
using conformance::Session;

constexpr size_t kHandle = NCCL_NET_HANDLE_MAXSIZE;
enum : uint64_t { kFinalized = 1 };

TEST(SecurityFinalize, TestAfterFinalizeReturnsAnError) {
  RunOptions o;
  o.nranks = 2;
  o.timeout = Ms(30000);
  RunRanks(o, [](Rank& r) {
    Session s;
    ASSERT_TRUE(s.ok());
    char handle[kHandle] = {};
    if (r.rank() == 0) {
      void* listen = nullptr;
      ASSERT_EQ(s.net().Listen(0, handle, &listen), ncclSuccess);
      ASSERT_TRUE(r.Send(1, handle, kHandle));
      void* recv = nullptr;
      ASSERT_EQ(s.net().ConnectAccept(0, nullptr, nullptr, listen, &recv, r.deadline()), ncclSuccess);
      Buffer buf(4096);
      void* mh = nullptr;
      ASSERT_EQ(s.net().RegMr(recv, buf.data(), buf.size(), &mh), ncclSuccess);
      void* data = buf.data();
      size_t size = buf.size();
      int tag = 1;
      void* req = nullptr;
      ASSERT_EQ(s.net().Irecv(recv, 1, &data, &size, &tag, &mh, &req), ncclSuccess);
      int done = 0;
      ASSERT_EQ(s.net().Test(req, &done, nullptr), ncclSuccess);
      ASSERT_EQ(done, 0);
      ASSERT_EQ(s.net().Finalize(), ncclSuccess);  // closes the comm and frees its requests
      done = -1;
      const ncclResult_t rc = s.net().Test(req, &done, nullptr);
      EXPECT_EQ(rc, ncclInvalidUsage);
      EXPECT_EQ(done, 0);
      EXPECT_FALSE(FindWarning({"after finalize"}).empty()) << CapturedWarnings();
      ASSERT_TRUE(r.SendU64(1, kFinalized));
    } else {
      ASSERT_TRUE(r.Recv(0, handle, kHandle));
      void* send = nullptr;
      ASSERT_EQ(s.net().ConnectAccept(0, handle, &send, nullptr, nullptr, r.deadline()), ncclSuccess);
      ASSERT_TRUE(r.Expect(0, kFinalized));
      s.net().CloseSend(send);
    }
  });
}

}  // namespace
}  // namespace railyard::security
