// TCP connection setup, accepting side: a listening socket that groups incoming
// sockets into connections by the hello record each one opens with. Bounded
// against strays and floods: a socket that sends no complete hello within
// acceptTimeoutMs is closed, so is a connection that gains no socket for that
// long, at most maxPendingSockets are held, and a socket whose hello is not a
// valid one for this listener is logged and dropped (accept keeps waiting).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "proxy/comm.h"
#include "proxy/handle.h"
#include "proxy/socket.h"
#include "proxy/tcp/tcp_options.h"

namespace railyard::proxy {

struct TcpConnection;

/// ListenComm over TCP. Accept never blocks and may be called repeatedly; one
/// listen comm accepts any number of connections.
class TcpListenComm final : public ListenComm {
 public:
  /// Binds a listening socket to `bindAddr` (port 0 = ephemeral) and fills
  /// `handle` with the address peers connect to. SystemError on socket failures.
  static Status Create(const sockaddr_storage& bindAddr, socklen_t bindLen,
                       const TcpOptions& options, const std::string& host,
                       const MrCache* cache, std::unique_ptr<TcpListenComm>* out,
                       ListenAddress* handle);

  /// Accepts pending sockets and reads the hellos that have arrived. Returns a
  /// RecvComm once every socket of one connection has arrived. A socket whose hello
  /// is not a Railyard record, is of another protocol version, names another
  /// listener or does not fit its connection is sent a reject record saying why,
  /// logged and closed; accept goes on waiting (it is not an error: NCCL treats
  /// accept errors as fatal, and a stray connection must not end the job).
  /// Costs one accept4 per new socket plus one epoll_wait per call; never blocks.
  /// Out of file descriptors (EMFILE/ENFILE) is logged, and the timeouts still run.
  Status Accept(RecvComm** recvComm) override;
  /// As Accept, but hands over the sockets of the next complete connection instead
  /// of making a TCP comm (*got = true then). With options.nsocks = 0 (the verbs
  /// transport) connections are the control socket alone, and a hello announcing
  /// data sockets is refused as a transport mismatch (and the other way round,
  /// unless options.acceptControlOnly: then both kinds arrive here).
  Status AcceptConnection(TcpConnection* conn, bool* got);

  /// Sockets held now (hello not complete, or waiting for the rest of their
  /// connection). For tests and diagnostics.
  size_t PendingSockets() const;

 private:
  struct Incoming {
    Fd fd;
    HelloRecord hello{};
    size_t got = 0;
    Clock::time_point since{};
    std::string from;  ///< "ip:port" of the connecting side
  };
  struct Group {
    HelloRecord first{};
    std::string address;
    std::vector<Fd> socks;  ///< index = hello sockIndex
    int have = 0;
    Clock::time_point last{};  ///< when its latest socket joined
  };
  /// Sends a reject record saying `why`, closes `fd` and logs it (WARN for the
  /// first few per listen comm, INFO after, so a flood cannot flood the log).
  void Refuse(Fd& fd, const std::string& from, const Status& why);
  /// Closes sockets and connections past their deadline.
  void Sweep(Clock::time_point now);
  /// Reads the hello of incoming socket `fd` (epoll said it is readable) and, once
  /// complete, checks it and files the socket under its connection.
  void ReadHello(int fd, Clock::time_point now);
  /// Removes incoming socket `fd` from the epoll set and the table; returns it.
  Fd TakeIncoming(int fd);

  TcpListenComm() = default;
  Fd fd_;
  Fd epoll_;  ///< watches the incoming sockets for their hellos
  uint64_t listenId_ = 0;
  TcpOptions options_;
  const MrCache* cache_ = nullptr;
  std::unordered_map<int, Incoming> incoming_;  ///< by fd
  std::map<uint64_t, Group> groups_;            ///< by connection id
  size_t groupSockets_ = 0;                     ///< sockets held in groups_
  uint64_t strays_ = 0;                         ///< sockets refused so far
  bool fdsExhausted_ = false;                   ///< last accept4 failed with EMFILE/ENFILE
  bool acceptBlocked_ = false;                  ///< the last call stopped accepting: cap or no descriptors
};

}  // namespace railyard::proxy
