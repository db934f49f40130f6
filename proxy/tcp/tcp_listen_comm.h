// TCP connection setup, accepting side: a listening socket that groups incoming
// sockets into connections by the hello record each one opens with.
#pragma once

#include <map>
#include <memory>
#include <string>
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

  /// Accepts pending sockets and reads their hellos. Returns a RecvComm once every
  /// socket of one connection has arrived. InvalidUsage when a hello is not a
  /// Railyard record, is of another protocol version, or names another listener; the
  /// connector is sent a reject record saying why before its sockets are closed.
  Status Accept(RecvComm** recvComm) override;
  /// As Accept, but hands over the sockets of the next complete connection instead
  /// of making a TCP comm (*got = true then). With options.nsocks = 0 (the verbs
  /// transport) connections are the control socket alone, and a hello announcing
  /// data sockets is refused as a transport mismatch (and the other way round,
  /// unless options.acceptControlOnly: then both kinds arrive here).
  Status AcceptConnection(TcpConnection* conn, bool* got);

 private:
  struct Incoming {
    Fd fd;
    HelloRecord hello{};
    size_t got = 0;
    Clock::time_point since{};
  };
  struct Group {
    HelloRecord first{};
    std::string address;
    std::vector<Fd> socks;  ///< index = hello sockIndex
    int have = 0;
  };
  Status Refuse(Fd& fd, const Status& why);

  TcpListenComm() = default;
  Fd fd_;
  uint64_t listenId_ = 0;
  TcpOptions options_;
  const MrCache* cache_ = nullptr;
  std::vector<Incoming> incoming_;
  std::map<uint64_t, Group> groups_;
};

}  // namespace railyard::proxy
