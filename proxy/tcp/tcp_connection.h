// The sockets of one established TCP connection, handed from connection setup to
// the send or receive comm that drives them.
#pragma once

#include <string>
#include <vector>

#include "proxy/comm.h"
#include "proxy/socket.h"

namespace railyard::proxy {

/// Control socket plus data sockets (index i of `data` is hello sockIndex i+1).
struct TcpConnection {
  Fd control;
  std::vector<Fd> data;
  std::vector<std::string> rails;  ///< rail of each data socket ("" when unknown)
  PeerInfo peer;
};

}  // namespace railyard::proxy
