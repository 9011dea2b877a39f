#include "core/utf8.h"

namespace baton::detail {

std::pair<char32_t, size_t> decode_utf8(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return {b0, 1};
  const size_t n = b0 >= 0xF0 && b0 < 0xF5 ? 4 : b0 >= 0xE0 && b0 < 0xF0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return {0, 0};
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // below: an overlong form
  if (cp < kSmallest[n] || !is_scalar_value(cp)) return {0, 0};
  return {cp, n};
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
    return;
  }
  const int continuation = cp < 0x800 ? 1 : cp < 0x10000 ? 2 : 3;
  constexpr unsigned char kLead[] = {0, 0xC0, 0xE0, 0xF0};
  out += char(kLead[continuation] | (cp >> (6 * continuation)));
  for (int k = continuation - 1; k >= 0; --k) out += char(0x80 | ((cp >> (6 * k)) & 0x3F));
}

}  // namespace baton::detail
