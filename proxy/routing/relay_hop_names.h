// Which relay carried a socket, for errors on the listening side. In fabric mode a
// relayed socket arrives from the relay's rail address, not from the connector's, so
// "peer h2 (10.99.3.1:42781)" would name h2 with h3's address. The router registers
// a namer (rail address -> host name, from the cabling graph) when fabric mode
// starts; the TCP listener asks ViaRelay for each socket it accepts.
#pragma once

#include <netinet/in.h>

#include <functional>
#include <string>

namespace railyard::proxy {

/// Maps a rail IPv4 address to the name of the host that owns it ("" = unknown).
using AddressNamer = std::function<std::string(const in_addr&)>;

/// Installs (or, with an empty function, removes) the process's namer. Thread-safe.
void SetAddressNamer(AddressNamer namer);

/// " via NAME (ADDR:PORT)" when the peer of socket `fd` is a host other than
/// `originHost` (a relay carried the socket); "" when the socket came straight from
/// `originHost`, when no namer is installed, or the address is unknown. ADDR:PORT
/// is the relay's end of this very socket.
std::string ViaRelay(int fd, const std::string& originHost);

}  // namespace railyard::proxy
