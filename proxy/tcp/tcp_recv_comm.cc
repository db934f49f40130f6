#include "proxy/tcp/tcp_recv_comm.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "env/log.h"

namespace railyard::proxy {

TcpRecvComm::TcpRecvComm(TcpConnection conn, const TcpOptions& options, const MrCache* cache)
    : conn_(std::move(conn)), options_(options), table_(this, cache) {
  const int nsocks = static_cast<int>(conn_.data.size());
  const int nthreads = std::max(1, std::min(options_.nthreads, nsocks));
  std::vector<std::vector<int>> assign(static_cast<size_t>(nthreads));
  for (int i = 0; i < nsocks; ++i) assign[static_cast<size_t>(i % nthreads)].push_back(i);
  Touch();
  try {
    for (auto& socks : assign) readers_.emplace_back([this, socks] { ReaderLoop(socks); });
  } catch (const std::system_error& e) {
    // Out of threads: the comm exists but is failed, so the first irecv/test says why.
    poison_.Set(SystemError("cannot start receive helper threads for " + conn_.peer.ToString() + ": " +
                            e.what()));
  }
}

TcpRecvComm::~TcpRecvComm() { Close(); }

void TcpRecvComm::Close() {
  if (closed_) return;
  closed_ = true;
  stop_.store(true, std::memory_order_release);
  conn_.control.Shutdown();
  for (const Fd& fd : conn_.data) fd.Shutdown();  // wakes readers blocked in recv/poll
  for (auto& t : readers_) {
    if (t.joinable()) t.join();
  }
  conn_.control.Reset();
  for (Fd& fd : conn_.data) fd.Reset();
}

Status TcpRecvComm::ReadChunk(int i, bool* eof) {
  const int fd = conn_.data[static_cast<size_t>(i)].get();
  const auto k = static_cast<size_t>(i);
  const std::string rail = k < conn_.rails.size() && !conn_.rails[k].empty() ? " on rail " + conn_.rails[k] : "";
  const std::string what = "data socket " + std::to_string(i + 1) + rail + " from " + conn_.peer.ToString();
  ChunkHeader h;
  RY_RETURN_IF_ERROR(RecvAll(fd, &h, sizeof h, what, eof));
  if (*eof) return Status::Ok();
  RY_RETURN_IF_ERROR(CheckHeader(h.header, ("chunk header on " + what).c_str()));
  if (h.header.kind != static_cast<uint16_t>(RecordKind::kChunk)) {
    return RemoteError("unexpected record kind " + std::to_string(h.header.kind) + " on " + what);
  }
  char* dest = nullptr;
  Status v = table_.Validate(h, &dest);
  if (!v.ok()) return RemoteError(v.message() + " (from " + conn_.peer.ToString() + ")");
  if (h.len > 0) RY_RETURN_IF_ERROR(RecvAll(fd, dest, h.len, what));
  Touch();
  return table_.Land(h);
}

void TcpRecvComm::ReaderLoop(std::vector<int> sockets) {
  std::vector<pollfd> pfds;
  for (int i : sockets) pfds.push_back(pollfd{conn_.data[static_cast<size_t>(i)].get(), POLLIN, 0});
  std::vector<bool> open(sockets.size(), true);
  size_t nopen = sockets.size();
  while (nopen > 0 && !stop_.load(std::memory_order_acquire)) {
    if (sockets.size() > 1) {
      int rc = ::poll(pfds.data(), pfds.size(), -1);
      if (rc < 0) {
        if (errno == EINTR) continue;
        poison_.Set(SystemError("poll on data sockets failed: " + ErrnoText(errno)));
        return;
      }
    } else {
      pfds[0].revents = POLLIN;  // one socket: block in recv directly
    }
    for (size_t k = 0; k < sockets.size(); ++k) {
      if (!open[k] || pfds[k].revents == 0) continue;
      bool eof = false;
      Status s = ReadChunk(sockets[k], &eof);
      if (stop_.load(std::memory_order_acquire)) return;
      if (!s.ok()) {
        poison_.Set(Status(s.code(), s.message() + "; waiting for " + table_.DescribeOldest()));
        return;
      }
      if (eof) {
        open[k] = false;
        pfds[k].fd = -1;  // poll ignores negative descriptors
        --nopen;
        int64_t none = 0;
        firstEofNs_.compare_exchange_strong(none, Clock::now().time_since_epoch().count());
        // All data precedes a clean EOF on each socket, so only once every data
        // socket is closed is the peer gone with nothing left in flight.
        if (cleanEofs_.fetch_add(1) + 1 == static_cast<int>(conn_.data.size())) {
          poison_.Set(SystemError(conn_.peer.ToString() + " closed the connection; waiting for " +
                                  table_.DescribeOldest()),
                      /*warn=*/table_.InFlight() > 0);
        }
      }
    }
  }
}

Status TcpRecvComm::FlushControl() {
  while (!controlOut_.empty()) {
    size_t sent = 0;
    Status s = TrySend(conn_.control.get(), controlOut_.data(), controlOut_.size(), &sent);
    controlOut_.erase(0, sent);
    if (!s.ok()) {
      return SystemError("control connection to " + conn_.peer.ToString() + " broke: " + s.message());
    }
    if (sent == 0) break;
  }
  return Status::Ok();
}

Status TcpRecvComm::Irecv(int n, void** data, const size_t* sizes, const int* tags,
                          MemoryRegion** mrs, Request** request) {
  *request = nullptr;
  if (poison_.IsSet()) return poison_.Get();
  RecvTable::Entry* e = nullptr;
  CtsRecord cts;
  RY_RETURN_IF_ERROR(table_.Post(n, data, sizes, tags, mrs, &e, &cts));
  controlOut_.append(reinterpret_cast<const char*>(&cts), sizeof cts);
  if (Status s = FlushControl(); !s.ok()) {
    poison_.Set(s);
    RecvTable::Release(*e);
    return s;
  }
  *request = e;
  return Status::Ok();
}

Status TcpRecvComm::Test(Request* request, int* done, int* sizes) {
  *done = 0;
  auto* e = static_cast<RecvTable::Entry*>(request);
  if (e->seq.load(std::memory_order_acquire) == RecvTable::kFree) {
    return InternalError("test of a receive request that is not in flight");
  }
  if (RecvTable::Done(*e)) {
    *done = 1;
    if (sizes != nullptr) {
      for (int i = 0; i < e->n; ++i) sizes[i] = static_cast<int>(e->total[i].load(std::memory_order_acquire));
    }
    RecvTable::Release(*e);
    return Status::Ok();
  }
  if (poison_.IsSet()) return poison_.Get();
  if (const int64_t eof = firstEofNs_.load(std::memory_order_relaxed); eof != 0) {
    // Data already in the kernel still lands after a clean close; give the other
    // sockets a moment, then call the receive lost.
    const auto since = Clock::now() - Clock::time_point(Clock::duration(eof));
    if (since > std::chrono::milliseconds(kEofGraceMs)) {
      Status lost = SystemError(conn_.peer.ToString() + " closed data socket(s) while " +
                                table_.DescribeOldest() + " was pending");
      poison_.Set(lost);
      return lost;
    }
  }
  if (Status s = FlushControl(); !s.ok()) {
    poison_.Set(s);
    return s;
  }
  const auto last = std::max(e->posted, Clock::time_point(Clock::duration(lastProgressNs_.load(std::memory_order_relaxed))));
  const auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last);
  if (idle.count() > options_.timeoutMs) {
    std::string tags;
    for (int i = 0; i < e->n; ++i) tags += (i ? "," : "") + std::to_string(e->tag[i]);
    const int me = LocalRank();
    Status t = RemoteError("receive (rank " + (me >= 0 ? std::to_string(me) : std::string("?")) +
                           " from rank " + tags + ", " + conn_.peer.ToString() + ", seq " +
                           std::to_string(e->seq.load()) + ") made no progress for " +
                           std::to_string(idle.count()) + " ms (RAILYARD_TIMEOUT_MS=" +
                           std::to_string(options_.timeoutMs) + ")");
    poison_.Set(t);
    return t;
  }
  return Status::Ok();
}

}  // namespace railyard::proxy
