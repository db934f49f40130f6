// Names that travel between hosts (host names, interface names): valid UTF-8,
// printable, cut only at character boundaries. Every name a peer sends goes
// through SanitizeName before anything stores, prints or floods it, and local
// names (--host-name, RAILYARD_HOST_NAME) through CheckLocalName, so no name can
// make JSON output throw (nlohmann::json refuses invalid UTF-8) or split a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "env/status.h"

namespace railyard::topology {

/// Longest host name on the cabling wire, in bytes (a 32-byte field with a NUL).
constexpr std::size_t kMaxHostNameBytes = 31;

/// True when `s` is valid UTF-8 (RFC 3629: shortest form, no surrogates, at most U+10FFFF).
bool IsValidUtf8(std::string_view s);

/// The longest prefix of `s` of at most `maxBytes` bytes that ends on a character
/// boundary. `s` should be valid UTF-8; an invalid tail is cut at the last lead byte.
std::string CutUtf8(std::string_view s, std::size_t maxBytes);

/// A safe copy of bytes from a peer: each invalid UTF-8 sequence and each control
/// character (U+0000..U+001F, U+007F, and the C1 controls U+0080..U+009F) becomes '?', then the result is cut to
/// `maxBytes` at a character boundary. Never throws; the result is valid UTF-8.
std::string SanitizeName(std::string_view raw, std::size_t maxBytes);

/// Checks a name the operator gave (`what` names its source, e.g. "--host-name" or
/// "RAILYARD_HOST_NAME") and cuts it to kMaxHostNameBytes at a character boundary.
/// InvalidUsage when it is not valid UTF-8 or holds a control character. *truncated
/// says whether it was cut (the caller warns).
Status CheckLocalName(std::string_view name, const std::string& what, std::string* out, bool* truncated);

}  // namespace railyard::topology
