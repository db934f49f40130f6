// CollProxy: the proxy thread of one CollComm. The comm's Worker and Endpoints are
// single-threaded, and the TCP emulation needs the target's CPU for every landing
// and acknowledgement, so a rank must keep polling even when it has nothing of its
// own to wait for (its neighbours' last Writes and credits still need it). One
// thread per collComm therefore owns the comm and polls it: it spins while a
// collective runs and wakes every `idlePollUs` otherwise; Post and Test are
// thread-safe hand-offs under one mutex (NCCL's proxy thread calls them). While a
// collective runs and nothing moves for a while, the thread naps 20 µs between polls.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "proxy/collectives/coll_comm.h"

namespace railyard::collectives {

class CollProxy {
 public:
  /// Takes a connected comm and starts its thread (the one place it starts).
  /// `idlePollUs`: how often an idle comm still polls (acks, neighbours' credits).
  explicit CollProxy(std::unique_ptr<CollComm> comm, int idlePollUs = 500);
  /// Stops and joins the thread, then destroys the comm (outstanding requests end).
  ~CollProxy();
  CollProxy(const CollProxy&) = delete;
  CollProxy& operator=(const CollProxy&) = delete;

  /// As CollComm::Post; wakes the thread.
  Status Post(CollOp op, CollRequest** out);
  /// As CollComm::Test, without progressing on the caller's thread.
  Status Test(CollRequest* req, bool* done, uint64_t* bytes);
  /// The algorithm of the last collective the comm began (CollComm::lastAlgorithm).
  Algorithm lastAlgorithm();
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  void Loop();

  std::unique_ptr<CollComm> comm_;
  const int rank_, nranks_;
  const int idlePollUs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool posted_ = false;
  std::thread thread_;
};

}  // namespace railyard::collectives
