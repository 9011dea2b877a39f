// Symbolic dims as ONNX computations (ExportContext::dims). A symbolic dim is a number
// times a product of plain symbols (`batch`, `784*batch`, `h*w`; baton/shape.h); its size
// is read from the shape of a graph input that has it (Shape with start and end picks the
// dim), or built from the plain symbols' sizes with Mul; a plain symbol no input has as a
// dim is divided out of one it is a factor of (`batch` from an input of `2*batch` rows).
// Each graph computes a dim once.
#include <algorithm>

#include "io/onnx/exporter.h"

namespace baton::onnx::detail {
namespace {

// The graph input and dim position holding exactly dim d, if one does.
std::optional<std::pair<std::string, int64_t>> source_of(const GraphWriter& w, int64_t d) {
  for (const auto& [name, shape] : w.shape_sources())
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] == d) return std::pair{name, int64_t(i)};
  return std::nullopt;
}

// A graph input's dim that is plain symbol s times a rest whose symbols graph inputs have
// as dims (2*batch, batch*seq with seq an input's dim): the input, the dim's position and
// that rest, from which s is the dim divided by the rest.
struct Multiple {
  std::string input;
  int64_t position, rest;
};
std::optional<Multiple> multiple_of(const GraphWriter& w, int64_t s) {
  for (const auto& [name, shape] : w.shape_sources())
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!sym::is_symbol(shape[i])) continue;
      const sym::Factors f = sym::factors(shape[i]);
      if (std::count(f.symbols.begin(), f.symbols.end(), s) != 1) continue;
      int64_t rest = f.coefficient;
      bool computable = true;
      for (int64_t t : f.symbols) {
        if (t == s) continue;
        computable = computable && source_of(w, t).has_value();
        rest = sym::mul(rest, t);
      }
      if (computable) return Multiple{name, int64_t(i), rest};
    }
  return std::nullopt;
}

}  // namespace

// Dim d as a 1-element int64 tensor in this context's graph.
std::string ExportContext::dim(int64_t d) {
  std::map<int64_t, std::string>& known = writer_.dims_in(graph_);
  if (auto it = known.find(d); it != known.end()) return it->second;
  std::string name;
  if (!sym::is_symbol(d)) {
    name = ints({d}, "size");
  } else if (auto source = source_of(writer_, d)) {
    name = fresh(str("dim_", sym::to_string(d)));
    add("Shape", {source->first}, {name}).attr("start", source->second).attr("end", source->second + 1);
  } else {
    const sym::Factors f = sym::factors(d);
    if (f.symbols.size() == 1 && f.coefficient == 1) {  // a plain symbol: divided out of a multiple
      const std::optional<Multiple> m = multiple_of(writer_, d);
      if (!m)
        fail(str("its symbolic dim ", sym::to_string(d), " is no dim of a graph input, nor a factor of one, so ONNX "
                 "cannot compute it"));
      const std::string whole = fresh(str("dim_", sym::to_string(m->rest), "_", sym::to_string(d)));
      add("Shape", {m->input}, {whole}).attr("start", m->position).attr("end", m->position + 1);
      name = fresh(str("dim_", sym::to_string(d)));
      add("Div", {whole, dim(m->rest)}, {name});
      return known[d] = name;
    }
    name = f.coefficient == 1 ? dim(f.symbols[0]) : dim(f.coefficient);
    for (size_t i = f.coefficient == 1 ? 1 : 0; i < f.symbols.size(); ++i) {
      const std::string product = fresh("dim_product");
      add("Mul", {name, dim(f.symbols[i])}, {product});
      name = product;
    }
  }
  return known[d] = name;
}

std::string ExportContext::dims(const std::vector<int64_t>& values, const std::string& hint) {
  if (std::none_of(values.begin(), values.end(), sym::is_symbol)) return ints(values, hint);
  std::vector<std::string> parts;
  for (int64_t d : values) parts.push_back(dim(d));
  if (parts.size() == 1) return parts[0];
  const std::string joined = fresh(hint);
  add("Concat", parts, {joined}).attr("axis", int64_t(0));
  return joined;
}

}  // namespace baton::onnx::detail
