// baton's change_case written as ONNX StringNormalizer with no stopwords (remove_words
// runs on concrete tensors only, so it never reaches a graph). Casts to and from string
// tensors are plain Cast nodes. StringNormalizer takes [C] or [1, C] only: other shapes
// are flattened around it and given back their shape (at most one symbolic dim, as -1).
#include <algorithm>

#include "baton/ops.h"
#include "io/onnx/exporter.h"

namespace baton::onnx::detail {

BATON_ONNX_EXPORTER("change_case", [](ExportContext& c) {
  const graph::SymShape& shape = c.input_type(0).shape;
  const bool takes_it = shape.rank() == 1 || (shape.rank() == 2 && shape[0].is_static() && shape[0].value() == 1);
  const std::string in = takes_it ? c.input(0) : c.fresh("flat"), out = takes_it ? c.output() : c.fresh("changed");
  if (!takes_it) c.add("Reshape", {c.input(0), c.ints({-1}, "minus_one")}, {in});
  c.add("StringNormalizer", {in}, {out})
      .attr("case_change_action", std::string(c.attrs().s("to") == "upper" ? "UPPER" : "LOWER"))
      .attr("is_case_sensitive", int64_t(1));
  if (takes_it) return;
  std::vector<int64_t> dims;  // the shape back, one symbolic dim as -1
  for (size_t d = 0; d < shape.rank(); ++d) dims.push_back(shape[d].is_static() ? shape[d].value() : -1);
  if (std::count(dims.begin(), dims.end(), -1) > 1)
    c.fail(str("takes shape ", shape, ": StringNormalizer needs [C] or [1, C], and with more than one symbolic dim "
               "the shape cannot be restored after flattening"));
  c.add("Reshape", {out, c.ints(dims, "shape")}, {c.output()});
});

}  // namespace baton::onnx::detail
