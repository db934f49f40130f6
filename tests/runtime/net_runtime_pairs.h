// Helpers of the NetRuntime tests (tests/runtime/net_runtime*_test.cc): a connected
// send/recv pair of one context, and one send carried to completion, both through
// the process's NetRuntime and its data path (IsendOn / IrecvOn), bounded in time.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "proxy/runtime/net_runtime.h"

namespace railyard::runtime {

/// Runs one send of `tag` from `send` to `recv` (both made by the runtime) to done.
inline void SendOnce(proxy::SendComm* send, proxy::RecvComm* recv, int tag) {
  NetRuntime& rt = NetRuntime::Process();
  std::vector<char> src(64, static_cast<char>(tag)), dst(64, 0);
  void *smh = nullptr, *rmh = nullptr;
  ASSERT_TRUE(rt.RegisterMemory(src.data(), src.size(), kPtrHost, fabric::MemoryKind::kHost, &smh).ok());
  ASSERT_TRUE(rt.RegisterMemory(dst.data(), dst.size(), kPtrHost, fabric::MemoryKind::kHost, &rmh).ok());
  void* data[1] = {dst.data()};
  size_t sizes[1] = {dst.size()};
  int tags[1] = {tag};
  void* mhs[1] = {rmh};
  proxy::Request* rr = nullptr;
  ASSERT_TRUE(IrecvOn(recv, 1, data, sizes, tags, mhs, &rr).ok());
  ASSERT_NE(rr, nullptr);
  proxy::Request* sr = nullptr;
  int sdone = 0, rdone = 0, rsize = 0, ssize = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((sdone == 0 || rdone == 0) && std::chrono::steady_clock::now() < until) {
    if (sr == nullptr) {
      ASSERT_TRUE(IsendOn(send, src.data(), src.size(), tag, smh, &sr).ok());
    }
    if (sr != nullptr && sdone == 0) {
      ASSERT_TRUE(sr->owner->Test(sr, &sdone, &ssize).ok());
    }
    if (rdone == 0) {
      ASSERT_TRUE(rr->owner->Test(rr, &rdone, &rsize).ok());
    }
  }
  ASSERT_EQ(sdone, 1);
  ASSERT_EQ(rdone, 1);
  EXPECT_EQ(rsize, 64);
  EXPECT_EQ(dst, src);
  EXPECT_TRUE(rt.Deregister(smh).ok());
  EXPECT_TRUE(rt.Deregister(rmh).ok());
}

/// A connected send/recv pair on device 0 of context `ctx`.
inline void Pair(CommContext* ctx, proxy::ListenComm** listen, proxy::SendComm** send, proxy::RecvComm** recv) {
  NetRuntime& rt = NetRuntime::Process();
  char handle[128] = {};
  ASSERT_TRUE(rt.Listen(ctx, 0, handle, listen).ok());
  *send = nullptr;
  *recv = nullptr;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*send == nullptr || *recv == nullptr) && std::chrono::steady_clock::now() < until) {
    if (*send == nullptr) {
      ASSERT_TRUE(rt.Connect(ctx, 0, handle, send).ok());
    }
    if (*recv == nullptr) {
      ASSERT_TRUE(rt.Accept(*listen, recv).ok());
    }
  }
  ASSERT_NE(*send, nullptr);
  ASSERT_NE(*recv, nullptr);
}

}  // namespace railyard::runtime
