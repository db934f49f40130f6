// TCP connection setup, connecting side: a resumable, non-blocking state machine
// that opens the control and data sockets and sends each one's hello.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proxy/comm.h"
#include "proxy/handle.h"
#include "proxy/socket.h"
#include "proxy/tcp/tcp_options.h"

namespace railyard::proxy {

struct TcpConnection;

/// Where one socket of a connection goes: the listener itself, or a relay.
struct SocketTarget {
  sockaddr_storage remote{};  ///< address to connect(2) to
  socklen_t remoteLen = 0;
  sockaddr_storage local{};   ///< source address to bind first (family AF_UNSPEC = any)
  socklen_t localLen = 0;
  std::vector<char> prefix;   ///< bytes sent before the hello (a RelayRecord), may be empty
  std::string rail;           ///< local rail name, for error messages ("" = unknown)
};

/// One connect() in progress. NCCL retries connect until it returns a comm; the
/// plugin keeps this object in the handle's connect-state area between retries.
class TcpConnector {
 public:
  /// Starts non-blocking connects of 1 + options.nsocks sockets to `to`.
  /// SystemError when a socket cannot be created.
  static Status Start(const ListenAddress& to, const TcpOptions& options,
                      const std::string& host, std::unique_ptr<TcpConnector>* out);
  /// Same, with one target per socket (control first, then the data sockets):
  /// fabric mode binds each socket to a rail and may go through relays.
  /// `targets.size()` must be options.nsocks + 1.
  static Status Start(const ListenAddress& to, std::vector<SocketTarget> targets,
                      const TcpOptions& options, const std::string& host,
                      std::unique_ptr<TcpConnector>* out);

  /// Advances without blocking. *sendComm stays NULL until every socket is
  /// connected and has sent its hello. SystemError when the listener refuses or is
  /// unreachable; RemoteError after RAILYARD_TIMEOUT_MS without completing.
  Status Progress(SendComm** sendComm);
  /// As Progress, but hands over the connected sockets instead of making a TCP
  /// comm (the verbs transport runs its QP handshake on the control socket; it
  /// starts with options.nsocks = 0). *done stays false until then.
  Status ProgressConnection(TcpConnection* conn, bool* done);

 private:
  struct Sock {
    Fd fd;
    bool connected = false;
    size_t sent = 0;
    std::vector<char> out;  ///< prefix + hello
    std::string rail;
  };
  TcpConnector() = default;

  ListenAddress to_;
  TcpOptions options_;
  std::vector<Sock> socks_;  ///< index 0 = control
  Clock::time_point started_{};
};

}  // namespace railyard::proxy
