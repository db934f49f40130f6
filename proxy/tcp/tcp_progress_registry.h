// Every live TCP comm of the process, so that one test() call moves the bytes of
// all of them: a rank that sends and receives at once (sendrecv, a ring) then
// alternates between its directions at a fine grain in one thread, as a raw
// polling TCP pump does, instead of draining one comm while the other's peer
// waits.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <vector>

#include "proxy/comm.h"

namespace railyard::proxy {

/// A comm whose sockets the calling thread can move bytes on.
class CallerDriven {
 public:
  virtual ~CallerDriven() = default;
  /// One non-blocking pass over the comm's sockets (skipping any a helper thread
  /// holds right now). Returns true when bytes moved.
  virtual bool CallerPass() = 0;
};

/// Process-wide list of live comms. Thread-safe.
class ProgressRegistry {
 public:
  /// Most time one Drive call spends while bytes keep moving (µs).
  static constexpr std::chrono::microseconds kDriveCap{250};

  static ProgressRegistry& Get() {
    static ProgressRegistry r;
    return r;
  }

  void Add(CallerDriven* c) {
    std::lock_guard lock(mu_);
    comms_.push_back(c);
  }
  /// After Remove returns, no Drive touches `c`.
  void Remove(CallerDriven* c) {
    std::lock_guard lock(mu_);
    comms_.erase(std::remove(comms_.begin(), comms_.end(), c), comms_.end());
  }

  /// Passes over every live comm until a pass moves no bytes, `done()` holds, or
  /// kDriveCap has passed. When another thread is driving, makes one pass over
  /// `self` only (never waits for it).
  void Drive(CallerDriven* self, const std::function<bool()>& done) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      self->CallerPass();
      return;
    }
    const auto until = Clock::now() + kDriveCap;
    for (;;) {
      bool moved = false;
      for (CallerDriven* c : comms_) moved = c->CallerPass() || moved;
      if (!moved || done() || Clock::now() >= until) return;
    }
  }

 private:
  std::mutex mu_;
  std::vector<CallerDriven*> comms_;
};

}  // namespace railyard::proxy
