// UTF-8 code points in and out, for the text that string tensors hold (case mapping,
// NumPy's UTF-32 arrays).
#pragma once
#include <string>
#include <string_view>
#include <utility>

namespace baton::detail {

// The code point starting at s[i] and its length in bytes; length 0 when the bytes there
// are no valid UTF-8 (a stray or cut sequence, an overlong form, a surrogate).
std::pair<char32_t, size_t> decode_utf8(std::string_view s, size_t i);

// Appends the UTF-8 form of cp, which must be a Unicode scalar value (is_scalar_value).
void append_utf8(char32_t cp, std::string& out);

inline bool is_scalar_value(char32_t cp) { return cp <= 0x10FFFF && !(cp >= 0xD800 && cp < 0xE000); }

}  // namespace baton::detail
