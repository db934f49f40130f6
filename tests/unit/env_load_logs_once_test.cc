// env::Load leaves reporting a configuration error to its caller (the plugin's
// init, a tool): it used to log "configuration error: ..." itself as well, so every
// malformed RAILYARD_* value was printed twice (railyard-info, railyardd, the
// plugin under NCCL). One test per binary: Load parses once per process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "env/config.h"
#include "tests/unit/log_capture.h"

namespace railyard {
namespace {

TEST(EnvLoad, AMalformedValueIsReturnedAndNotLoggedByLoad) {
  ASSERT_EQ(::setenv("RAILYARD_NSOCKS", "abc", 1), 0);
  test_support::LogCapture capture;
  const env::Config* cfg = nullptr;
  const Status s = env::Load(&cfg);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::HasSubstr("RAILYARD_NSOCKS='abc'"));
  EXPECT_EQ(cfg, nullptr);
  for (const std::string& line : capture.lines()) EXPECT_THAT(line, ::testing::Not(::testing::HasSubstr("abc")));
  // Cached: the second call returns the same error, still without logging it.
  EXPECT_EQ(env::Load(&cfg).message(), s.message());
  EXPECT_TRUE(capture.At(log::Level::kWarn).empty());
}

}  // namespace
}  // namespace railyard
