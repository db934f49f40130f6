// Who moves a TCP comm's bytes: the thread that calls isend/irecv/test, while it
// keeps calling (NCCL's proxy thread polls test() in a loop), else the comm's
// helper threads. One thread doing non-blocking I/O on every socket, as a raw
// polling TCP pump does, needs no wake-ups or context switches; the helpers keep
// data moving when nobody calls test() (a caller blocked elsewhere, or preempted).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "proxy/comm.h"

namespace railyard::proxy {

/// Hand-off clock between a comm's calling thread and its helper threads.
/// Thread-safe (one relaxed atomic).
class ProgressGate {
 public:
  /// A helper stands by while the caller called within this window, and takes
  /// over once the caller has been quiet this long (µs).
  static constexpr std::chrono::microseconds kHandoff{1000};

  /// Called on every isend/irecv/test: the caller is driving the sockets.
  void NoteCall() { lastCallNs_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

  /// How long a helper should still stand by before it moves bytes itself; zero
  /// (or negative) when the caller has been quiet for kHandoff.
  Clock::duration StandBy() const {
    const Clock::time_point last(Clock::duration(lastCallNs_.load(std::memory_order_relaxed)));
    return last + kHandoff - Clock::now();
  }

 private:
  std::atomic<int64_t> lastCallNs_{0};
};

}  // namespace railyard::proxy
