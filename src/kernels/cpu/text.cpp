#include "kernels/cpu/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "baton/error.h"
#include "kernels/cpu/convert.h"

namespace baton::kernels {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

[[noreturn]] void unreadable(std::string_view text, std::string_view as) {
  throw ValueError("cast", str("cannot read the string \"", text, "\" as ", as,
                               " (decimal or scientific notation, NaN, INF, +INF, -INF expected)"),
                   SourceLoc::current());
}

// The whole of `text` as a V by from_chars (which takes no leading '+'), or nothing.
template <class V>
std::errc read_all(std::string_view text, V& out) {
  if (text.size() > 1 && text.front() == '+' && text[1] != '-') text.remove_prefix(1);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end != text.data() + text.size() ? std::errc::invalid_argument : ec;
}

// NaN and the infinities, spelled as ONNX does, in any case; else a number, which beyond
// V's range is an infinity (or, below its smallest step, a zero) of its sign.
template <class V>
V read_float(std::string_view text, std::string_view as) {
  constexpr V inf = std::numeric_limits<V>::infinity();
  if (equals_ignoring_case(text, "nan")) return std::numeric_limits<V>::quiet_NaN();
  if (equals_ignoring_case(text, "inf") || equals_ignoring_case(text, "+inf")) return inf;
  if (equals_ignoring_case(text, "-inf")) return -inf;
  V v{};
  std::errc ec = read_all(text, v);
  if (ec == std::errc::result_out_of_range) {
    long double wide = 0;
    if (read_all(text, wide) == std::errc()) return std::copysign(std::fabs(wide) < 1 ? V(0) : inf, V(wide));
  }
  if (ec != std::errc()) unreadable(text, as);
  return v;
}

// Scientific text ("-1.25e-03") written positionally when the decimal exponent is in
// [-4, 16), as NumPy prints floats ("-0.00125"); beyond, kept as it is.
std::string positional_unless_extreme(std::string_view sci) {
  const size_t e = sci.find('e');
  int exponent = 0;
  std::from_chars(sci.data() + e + (sci[e + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exponent);
  if (exponent < -4 || exponent >= 16) return std::string(sci);
  const bool negative = sci.front() == '-';
  std::string digits;
  for (char ch : sci.substr(negative ? 1 : 0, e - (negative ? 1 : 0)))
    if (ch != '.') digits += ch;
  const int whole = exponent + 1;  // digits before the point
  std::string out = negative ? "-" : "";
  if (whole <= 0) return out + "0." + std::string(size_t(-whole), '0') + digits;
  if (size_t(whole) >= digits.size()) return out + digits + std::string(size_t(whole) - digits.size(), '0');
  return out + digits.substr(0, size_t(whole)) + "." + digits.substr(size_t(whole));
}

std::string special_float(double v) { return std::isnan(v) ? "NaN" : v < 0 ? "-INF" : "INF"; }

// float and double: the shortest digits that read back as v.
template <class T>
std::string format_float(T v) {
  if (!std::isfinite(v)) return special_float(v);
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return positional_unless_extreme(std::string_view(buf, size_t(end - buf)));
}

// f16 and bf16: the fewest significant digits that read back as the same bits.
template <class T>
std::string format_small_float(T v) {
  const float f = v.to_float();
  if (!std::isfinite(f)) return special_float(f);
  char buf[64];
  for (int decimals = 0;; ++decimals) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific, decimals);
    const std::string_view text(buf, size_t(end - buf));
    if (T(read_float<double>(text, "")).bits == v.bits || decimals >= 8) return positional_unless_extreme(text);
  }
}

}  // namespace

template <class T>
std::string format_value(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (is_small_float_v<T>) {
    return format_small_float(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return format_float(v);
  } else {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, end);
  }
}

template <class T>
T parse_value(std::string_view text) {
  constexpr DType dtype = dtype_v<T>;
  if constexpr (std::is_same_v<T, bool>) {
    if (equals_ignoring_case(text, "true")) return true;
    if (equals_ignoring_case(text, "false")) return false;
    return read_float<double>(text, dtype_name(dtype)) != 0;
  } else if constexpr (is_small_float_v<T>) {
    return T(read_float<double>(text, dtype_name(dtype)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return read_float<T>(text, dtype_name(dtype));
  } else {
    T exact{};
    if (read_all(text, exact) == std::errc()) return exact;
    return convert<T>(read_float<double>(text, dtype_name(dtype)));  // "100.5", "1e3", out of range
  }
}

#define BATON_TEXT_CONVERSIONS(T)                 \
  template std::string format_value<T>(T);        \
  template T parse_value<T>(std::string_view);
BATON_TEXT_CONVERSIONS(bool)
BATON_TEXT_CONVERSIONS(int32_t)
BATON_TEXT_CONVERSIONS(int64_t)
BATON_TEXT_CONVERSIONS(float)
BATON_TEXT_CONVERSIONS(double)
BATON_TEXT_CONVERSIONS(uint8_t)
BATON_TEXT_CONVERSIONS(int8_t)
BATON_TEXT_CONVERSIONS(int16_t)
BATON_TEXT_CONVERSIONS(uint16_t)
BATON_TEXT_CONVERSIONS(uint32_t)
BATON_TEXT_CONVERSIONS(uint64_t)
BATON_TEXT_CONVERSIONS(Half)
BATON_TEXT_CONVERSIONS(BFloat16)
#undef BATON_TEXT_CONVERSIONS

}  // namespace baton::kernels
