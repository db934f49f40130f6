#include "topology/utf8_name.h"

#include <algorithm>
#include <cstdint>

namespace railyard::topology {

namespace {

/// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
std::size_t SequenceLength(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF as a lead
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7F; }

}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string CutUtf8(std::string_view s, std::size_t maxBytes) {
  if (s.size() <= maxBytes) return std::string(s);
  std::size_t end = maxBytes;
  // Back up over continuation bytes to the lead byte of the character cut in two.
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end));
}

std::string SanitizeName(std::string_view raw, std::size_t maxBytes) {
  // The usual name is printable ASCII: nothing to replace, and a cut anywhere is a
  // character boundary (every cabling datagram carries two to four names).
  if (std::all_of(raw.begin(), raw.end(), [](char c) { return c >= 0x20 && c < 0x7F; })) {
    return std::string(raw.substr(0, maxBytes));
  }
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size();) {
    const std::size_t n = SequenceLength(raw, i);
    // C1 controls (U+0080..U+009F, C2 80..C2 9F) too: a terminal may act on them (CSI).
    const bool c1 = n == 2 && static_cast<unsigned char>(raw[i]) == 0xC2 && static_cast<unsigned char>(raw[i + 1]) < 0xA0;
    if (n == 0 || c1 || (n == 1 && IsControl(static_cast<unsigned char>(raw[i])))) {
      out += '?';
      i += c1 ? 2 : 1;  // a C1 control is one character of two bytes
      continue;
    }
    out.append(raw.substr(i, n));
    i += n;
  }
  return CutUtf8(out, maxBytes);
}

Status CheckLocalName(std::string_view name, const std::string& what, std::string* out, bool* truncated) {
  if (!IsValidUtf8(name)) {
    return InvalidUsage(what + ": the host name is not valid UTF-8");
  }
  for (unsigned char c : name) {
    if (IsControl(c)) return InvalidUsage(what + ": the host name holds a control character");
  }
  *out = CutUtf8(name, kMaxHostNameBytes);
  *truncated = out->size() != name.size();
  return Status::Ok();
}

}  // namespace railyard::topology
