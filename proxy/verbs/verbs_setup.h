// Verbs connection setup. A TCP control socket (proxy/tcp setup with no data
// sockets) carries the handshake; both ends stay non-blocking throughout:
//
//   connector                                   listener
//   create QPs (INIT), FIFO  ── QP set ──────▶  validate; create QPs, rings;
//                                                post receive WRs; RTR, RTS
//   validate; RTR, RTS       ◀── QP set ──────
//                            ── ready ───────▶  the comm is usable
//
// Every record set is validated in full (qp_record.h) before any QP is modified.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "proxy/handle.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_connector.h"
#include "proxy/tcp/tcp_listen_comm.h"
#include "proxy/verbs/verbs_comm.h"

namespace railyard::proxy::verbs {

/// What a verbs device is made of and how its connections are set up.
struct VerbsDeviceSetup {
  IbPorts* ib = nullptr;   ///< the process's ports (not owned)
  std::vector<int> ports;  ///< indices into ib of the device's rails (1 = one port; more = a fused device)
  LinkConfig link;         ///< QPs per connection, TC/SL, timeout, retry
  int initTrafficClass = -1;  ///< v11 init's trafficClass (-1 = undefined)
  VerbsOptions options;
  /// Fabric mode (switchless): the listener takes, for each connection, the ports
  /// on the same point-to-point subnets as the connector's rails (IbPort::OnSubnet),
  /// and also accepts TCP connections (relayed peers) with `tcp` settings.
  bool fabric = false;
};

/// Reads one whole handshake record from a non-blocking socket across calls.
class RecordReader {
 public:
  /// Reads what is available. *done once a whole record is in bytes(); the length is
  /// taken from the QP set header (kKindQpSet) or is sizeof(RecordHeader) otherwise.
  /// SystemError when the socket breaks or closes; InvalidUsage from QpSetLength.
  Status Read(int fd, const std::string& peer, bool* done);
  const std::vector<char>& bytes() const { return buf_; }

 private:
  std::vector<char> buf_;
  size_t want_ = sizeof(RecordHeader);
};

/// Writes a record to a non-blocking socket across calls.
class RecordWriter {
 public:
  void Set(std::vector<char> bytes) { buf_ = std::move(bytes); sent_ = 0; }
  /// *done once every byte is sent. SystemError when the socket breaks.
  Status Write(int fd, const std::string& peer, bool* done);

 private:
  std::vector<char> buf_;
  size_t sent_ = 0;
};

/// One verbs connect() in progress (kept in the handle between NCCL's retries).
class VerbsConnector {
 public:
  /// Starts the TCP control connection to `to`. `to.verbsRails` must be > 0 (a
  /// verbs listener): InvalidUsage otherwise ("the listener uses TCP").
  static Status Start(const ListenAddress& to, const VerbsDeviceSetup& setup, const TcpOptions& tcp,
                      const std::string& host, std::unique_ptr<VerbsConnector>* out);
  /// Same, with the control socket going to `control` (fabric mode: bound to a rail
  /// of the cable to the listener's host).
  static Status Start(const ListenAddress& to, const VerbsDeviceSetup& setup, const TcpOptions& tcp,
                      const std::string& host, SocketTarget control, std::unique_ptr<VerbsConnector>* out);
  /// Advances without blocking; *comm stays NULL until the QPs are RTS and the
  /// ready record is sent. Errors name the listener and the failing step.
  Status Progress(SendComm** comm);

 private:
  VerbsConnector() = default;
  ListenAddress to_;
  VerbsDeviceSetup setup_;
  std::unique_ptr<TcpConnector> tcp_;
  TcpConnection conn_;
  int state_ = 0;  ///< 0 TCP, 1 sending set, 2 reading set, 3 sending ready
  std::unique_ptr<QpBundle> qps_;
  std::unique_ptr<RegisteredBuffer> fifo_, staging_;
  QpSet remote_;
  RecordReader reader_;
  RecordWriter writer_;
  Clock::time_point started_ = Clock::now();
};

/// ListenComm of the verbs transport.
class VerbsListenComm final : public ListenComm {
 public:
  /// Listens on `bindAddr` (TCP, for the control sockets) and fills `handle`
  /// (verbsRails = number of the device's rails). With setup.fabric, TCP connections
  /// (with data sockets, e.g. through relays) are accepted too and get TCP comms.
  static Status Create(const sockaddr_storage& bindAddr, socklen_t bindLen, const VerbsDeviceSetup& setup,
                       const TcpOptions& tcp, const std::string& host, std::unique_ptr<VerbsListenComm>* out,
                       ListenAddress* handle);
  /// Accepts control sockets and runs their handshakes; returns a comm when one
  /// completes. A bad record set is refused (the connector sees the socket close)
  /// and reported here as InvalidUsage naming what was wrong.
  Status Accept(RecvComm** recvComm) override;

 private:
  struct Pending {
    TcpConnection conn;
    int state = 0;  ///< 0 reading set, 1 sending set, 2 reading ready
    std::unique_ptr<QpBundle> qps;
    std::unique_ptr<RegisteredBuffer> rings, staging;
    QpSet remote;
    RecordReader reader;
    RecordWriter writer;
    Clock::time_point since = Clock::now();
  };
  Status Step(Pending& p, RecvComm** comm);
  /// Fabric mode: the local ports facing the connector's rails, and each QP's rail.
  Status MatchRails(const QpSet& remote, std::vector<int>* ports, std::vector<int>* qpRails) const;
  VerbsListenComm() = default;
  TcpOptions tcpOptions_;
  std::unique_ptr<TcpListenComm> tcp_;
  VerbsDeviceSetup setup_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

}  // namespace railyard::proxy::verbs
