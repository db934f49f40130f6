// See device_list_syntax.h.
#include "env/device_list_syntax.h"

#include <string>

namespace railyard::env {

Status CheckDeviceListSyntax(std::string_view value, std::string_view source) {
  if (value.empty()) return Status::Ok();
  const std::string head = std::string(source) + "='" + std::string(value) + "': ";
  // The examples follow the list's kind: RDMA devices (RAILYARD_HCA, NCCL_IB_HCA) or
  // network interfaces (the *_IFNAME variables).
  const bool hca = source.find("HCA") != std::string_view::npos;
  const char* forms = hca ? " (NCCL's forms: mlx5, =mlx5_0:1, ^mlx5_1, ^=mlx5_1:1; a comma list of RDMA device "
                            "names, each optionally :port)"
                          : " (NCCL's forms: eth, =eth0, ^docker, ^=docker0; a comma list of interface names)";
  std::string_view rest = value;
  if (rest.front() == '^') rest.remove_prefix(1);
  if (!rest.empty() && rest.front() == '=') rest.remove_prefix(1);
  const std::string_view header = value.substr(0, value.size() - rest.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '^' || rest[i] == '=') {
      return InvalidUsage(head + "'" + std::string(1, rest[i]) + "' may only lead the list ('^' excludes, '=' " +
                          "matches exact names, in the order ^=), not stand at offset " +
                          std::to_string(header.size() + i) + forms);
    }
  }
  // An RDMA entry's port, when given, is an ibverbs port number: 1..255 in decimal (NCCL
  // reads it with atoi, so "mlx5_0:x" silently selected port 0, which no device has;
  // new-user trial). Fields after a second ':' stay ignored, as in NCCL.
  for (size_t pos = 0; hca && pos <= rest.size();) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string_view::npos) comma = rest.size();
    const std::string_view item = rest.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon == 0) continue;  // no port; a nameless entry is judged below
    std::string_view port = item.substr(colon + 1);
    port = port.substr(0, port.find(':'));
    int n = 0;
    bool digits = !port.empty() && port.size() <= 3;
    for (char c : port) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) n = n * 10 + (c - '0');
    }
    if (!digits || n < 1 || n > 255) {
      return InvalidUsage(head + "the port of '" + std::string(item) + "' is '" + std::string(port) +
                          "', not an RDMA port number (1..255)" + forms);
    }
  }
  // At least one name: some entry with a character before its ':' (NCCL skips the rest).
  bool named = false;
  size_t pos = 0;
  while (pos <= rest.size() && !named) {
    size_t comma = rest.find(',', pos);
    if (comma == std::string_view::npos) comma = rest.size();
    const std::string_view item = rest.substr(pos, comma - pos);
    named = !item.empty() && item.front() != ':';
    pos = comma + 1;
  }
  if (!named) {
    return InvalidUsage(head + (header.empty() ? std::string("no interface or device name")
                                               : "'" + std::string(header) + "' with no name after it") +
                        "; leave it empty (unset) for the automatic choice" + forms);
  }
  return Status::Ok();
}

}  // namespace railyard::env
