// LogBudget (env/log_budget.h): N lines per window, the rest counted and
// reported once the window has ended, on an injected clock.
#include <chrono>

#include <gtest/gtest.h>

#include "env/log_budget.h"

namespace railyard::log {
namespace {

using std::chrono::milliseconds;

TEST(LogBudget, NLinesAWindowThenACountReportedOnce) {
  LogBudget b(3, milliseconds(1000));
  const LogBudget::Clock::time_point t0 = LogBudget::Clock::time_point{} + std::chrono::hours(1);
  EXPECT_TRUE(b.Take(t0));
  EXPECT_TRUE(b.Take(t0 + milliseconds(1)));
  EXPECT_TRUE(b.Take(t0 + milliseconds(2)));
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(b.Take(t0 + milliseconds(10 + i)));
  EXPECT_EQ(b.TakeSuppressed(t0 + milliseconds(500)), 0u);  // the window is not over
  EXPECT_EQ(b.TakeSuppressed(t0 + milliseconds(1000)), 5u);
  EXPECT_EQ(b.TakeSuppressed(t0 + milliseconds(1001)), 0u);  // reported once
  // The new window has its budget back.
  EXPECT_TRUE(b.Take(t0 + milliseconds(1002)));
  EXPECT_TRUE(b.Take(t0 + milliseconds(1003)));
  EXPECT_TRUE(b.Take(t0 + milliseconds(1004)));
  EXPECT_FALSE(b.Take(t0 + milliseconds(1005)));
  // Suppressed lines of a window that ended while nobody asked still come out.
  EXPECT_TRUE(b.Take(t0 + milliseconds(5000)));
  EXPECT_EQ(b.TakeSuppressed(t0 + milliseconds(5001)), 1u);
}

}  // namespace
}  // namespace railyard::log
