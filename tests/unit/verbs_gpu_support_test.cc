// GPU-memory facts behind the verbs transport's ptrSupport (proxy/verbs/gpu_support.h).
#include "proxy/verbs/gpu_support.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace railyard::proxy::verbs {
namespace {

namespace fs = std::filesystem;

/// A fresh temporary directory standing in for /sys, removed at the end.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/railyard-gpu-sysfs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void Touch(const std::string& rel) {
    fs::create_directories(fs::path(root_ + rel).parent_path());
    std::ofstream(root_ + rel) << "1.2\n";
  }
  std::string root_;
};

TEST_F(FakeSysfs, NoPeerMemoryModuleMeansNoGdr) {
  EXPECT_FALSE(GdrPeerMemory(root_));
  Touch("/module/nvidia/version");  // the GPU driver alone is not peer memory
  EXPECT_FALSE(GdrPeerMemory(root_));
}

TEST_F(FakeSysfs, EachPeerMemoryModuleNcclKnowsCounts) {
  for (const char* f : {"/kernel/mm/memory_peers/nv_mem/version", "/module/nvidia_peermem/version",
                        "/module/nv_peer_mem/version"}) {
    fs::remove_all(root_);
    fs::create_directories(root_);
    EXPECT_FALSE(GdrPeerMemory(root_)) << f;
    Touch(f);
    EXPECT_TRUE(GdrPeerMemory(root_)) << f;
  }
}

TEST(CudaDmaBuf, FalseOnAHostWithoutAGpu) {
  if (::access("/dev/nvidia0", F_OK) == 0) GTEST_SKIP() << "this host has a GPU";
  EXPECT_FALSE(CudaDmaBuf());
  EXPECT_FALSE(CudaDmaBuf());  // cached, and still false
}

}  // namespace
}  // namespace railyard::proxy::verbs
