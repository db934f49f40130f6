// The sources a Worker's listener takes sockets from. A relay host's Forwarder ports
// listen on rail addresses that a host off the cable can still reach (it routes the
// cable's subnet through this host's management address: hostile-peer probe), so those
// ports accept only the neighbour's ends of the cable, read off the cabling graph, and
// close any other socket at accept, before a byte of it is read. Shared by the TCP
// Worker (TcpOptions::acceptOnlyFrom) and the verbs Worker's bootstrap listener
// (VerbsOptions::acceptOnlyFrom).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::fabric {

/// A parsed list of IPv4 sources; empty = any source.
class AcceptSources {
 public:
  /// Parses dotted IPv4 addresses. InvalidArgument naming `what` and the first entry
  /// that is not one (e.g. "TCP fabric: accepted source 'x' is not an IPv4 address").
  static Status Parse(const std::vector<std::string>& list, const std::string& what, AcceptSources* out);
  /// True when the list is empty or the accepted socket `fd`'s peer address is in it;
  /// false for any other source and for a socket whose peer cannot be read.
  bool Allows(int fd) const;
  /// True when some source is named (a socket may be refused).
  bool restricted() const { return !allowed_.empty(); }

 private:
  std::vector<in_addr> allowed_;
};

}  // namespace railyard::fabric
