// Numbers as text and back, as cast does it between string tensors and the others (the
// rules of ONNX's Cast):
//   - to text: the shortest digits that read back as the same value of the element's own
//     type (0.1f -> "0.1", f16 0.1 -> "0.1"), NaN as "NaN", infinities as "INF" / "-INF",
//     bool as "True" / "False";
//   - from text: decimal and scientific notation ("3.14", "1E8"), "NaN", "INF", "+INF",
//     "-INF" in any case; to an integer, a fraction truncates toward zero and a value out
//     of range saturates ("100.5" -> 100); to bool, "True" / "False" in any case or a
//     number (nonzero is true). Anything else is a ValueError naming the text.
#pragma once
#include <string>
#include <string_view>

namespace baton::kernels {

// T: every dtype's C++ type but std::string.
template <class T> std::string format_value(T v);
template <class T> T parse_value(std::string_view text);

}  // namespace baton::kernels
