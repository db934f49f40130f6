// LogBudget: at most N log lines per window for one kind of event that a peer can
// cause at will (a relay's refusals and resets, a snapshot peer's refused or dropped
// clients: every hostile socket would otherwise write a WARN, and a flood of them fills
// the journal; in env/ so that every layer may use it). The lines over the budget are
// counted, and the count is reported once the window ends.
//
// Threading: none (one thread owns it, or its owner locks around it).
#pragma once

#include <chrono>
#include <cstdint>

namespace railyard::log {

/// See file comment.
class LogBudget {
 public:
  using Clock = std::chrono::steady_clock;
  /// `lines` per `window` (both > 0).
  LogBudget(int lines, std::chrono::milliseconds window) : lines_(lines), window_(window) {}

  /// True when a line may be logged now (and counts it); false when the window's
  /// budget is spent (the line is counted as suppressed).
  bool Take(Clock::time_point now) {
    Roll(now);
    if (used_ < lines_) {
      ++used_;
      return true;
    }
    ++suppressed_;
    return false;
  }
  /// Lines suppressed in windows that have ended, returned once (0 when none):
  /// the caller logs "N more ... not logged". Call it now and then (a sweep).
  uint64_t TakeSuppressed(Clock::time_point now) {
    Roll(now);
    const uint64_t n = reported_;
    reported_ = 0;
    return n;
  }
  std::chrono::milliseconds window() const { return window_; }

 private:
  void Roll(Clock::time_point now) {
    if (now - start_ < window_) return;
    reported_ += suppressed_;
    suppressed_ = 0;
    used_ = 0;
    start_ = now;
  }

  int lines_;
  std::chrono::milliseconds window_;
  Clock::time_point start_{};
  int used_ = 0;
  uint64_t suppressed_ = 0;  ///< in the current window
  uint64_t reported_ = 0;    ///< from ended windows, not yet taken
};

}  // namespace railyard::log
