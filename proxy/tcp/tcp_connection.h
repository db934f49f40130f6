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

  /// The distinct rails of the data sockets joined with '+', e.g. "p1r0+p1r1", or
  /// `fallback` when none is known. What peer.device shows in error messages.
  std::string RailsText(const std::string& fallback) const {
    std::string out;
    for (const std::string& r : rails) {
      if (!r.empty() && ("+" + out + "+").find("+" + r + "+") == std::string::npos) {
        out += (out.empty() ? "" : "+") + r;
      }
    }
    return out.empty() ? fallback : out;
  }
};

}  // namespace railyard::proxy
