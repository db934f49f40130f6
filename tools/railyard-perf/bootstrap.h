// A small TCP bootstrap for railyard-perf ranks (independent of the plugin under
// test): rank 0 is the hub, every other rank holds one socket to it. Offers the
// three collectives the benchmark needs: allgather of fixed-size blobs, barrier
// and an allreduce of doubles. Every wait is bounded by one absolute deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::perf {

/// Absolute time limit for a blocking bootstrap step.
using Deadline = std::chrono::steady_clock::time_point;

/// A deadline `seconds` from now.
Deadline DeadlineIn(double seconds);

/// A listening TCP socket owned by the caller (close with CloseFd).
struct Listener {
  int fd = -1;    ///< listening socket
  int port = 0;   ///< bound port (useful when 0 was requested)
};

/// Binds and listens on `host`:`port` (IPv4; "127.0.0.1" and port 0 for the
/// local -np mode). The socket is close-on-exec.
Status ListenTcp(const std::string& host, int port, Listener* out);

/// close() that ignores -1 and EINTR.
void CloseFd(int fd);

/// Operation for AllReduce.
enum class ReduceOp { kMax, kSum };

/// One rank's end of the bootstrap. Movable, not copyable; closes its sockets.
class Bootstrap {
 public:
  /// An unconnected bootstrap (rank -1); fill it with CreateRoot or Join.
  Bootstrap() = default;
  ~Bootstrap();
  Bootstrap(Bootstrap&& other) noexcept;
  Bootstrap& operator=(Bootstrap&& other) noexcept;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  /// Rank 0: accepts the other nranks-1 ranks on `listenFd` (which it then
  /// closes) and checks that each says the same nranks and a distinct rank.
  /// Every later collective must finish before `deadline`.
  static Status CreateRoot(int listenFd, int nranks, Deadline deadline, Bootstrap* out);

  /// Rank `rank` > 0: connects to rank 0 at host:port, retrying refused
  /// connections (rank 0 may start later on another host) until `deadline`.
  static Status Join(const std::string& host, int port, int rank, int nranks, Deadline deadline,
                     Bootstrap* out);

  /// This process's rank (0 = the hub).
  int rank() const { return rank_; }
  /// Number of ranks in the run.
  int nranks() const { return nranks_; }
  /// The deadline every collective must meet (CreateRoot's / Join's); a collective that
  /// fails before it failed because a peer's connection closed or broke, not by timing out.
  Deadline deadline() const { return deadline_; }

  /// Every rank contributes `bytes` bytes; `all` (nranks × bytes) receives them
  /// in rank order on every rank.
  Status AllGather(const void* mine, std::size_t bytes, void* all);

  /// Returns on every rank once every rank has entered it.
  Status Barrier();

  /// Never blocks: fails when a bootstrap connection has been closed or broke
  /// (the process at the other end exited), so that a rank spinning on plugin
  /// calls stops early instead of waiting for its deadline. Data that is
  /// already waiting (a peer ahead in the next collective) counts as alive.
  Status CheckPeers() const;

  /// After this rank failed: whether another rank's process has gone (CheckPeers fails)
  /// within `grace`, polled without blocking; `*why` then gets CheckPeers' words. A
  /// dead peer's sockets close at once; a rank failing on its own waits `grace`.
  bool PeerGoneWithin(std::chrono::milliseconds grace, std::string* why) const;

  /// Closes every bootstrap connection now, so that the peers' CheckPeers see this rank
  /// gone at once (a failed rank leaves before its slower plugin teardown). Later
  /// collectives fail; the rank, nranks and deadline stay.
  void Leave();

  /// Element-wise max or sum of `values` over all ranks, written back on every rank.
  /// Every rank must pass the same number of values.
  Status AllReduce(std::span<double> values, ReduceOp op);

 private:
  Status Exchange(std::uint32_t op, const void* mine, std::size_t bytes, std::vector<char>* all);
  void CloseAll();
  /// How often a collective that waits on a peer says so on stderr (ms): a quarter of
  /// the time from CreateRoot/Join to the deadline, within 1-30 s.
  int NoteMs() const;

  int rank_ = -1;
  int nranks_ = 0;
  Deadline deadline_{};
  Deadline start_{};  ///< when CreateRoot/Join connected it (NoteMs)
  std::uint32_t seq_ = 0;
  std::vector<int> fds_;  ///< rank 0: fds_[r] = socket to rank r (fds_[0] = -1); others: fds_[0] = socket to rank 0
};

}  // namespace railyard::perf
