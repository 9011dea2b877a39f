#include "ops/epilogue.h"

#include <algorithm>

namespace baton::ops {

using Kind = kernels::Activation::Kind;

std::vector<const char*> activation_param_names(Kind kind) {
  switch (kind) {
    case Kind::leaky_relu: return {"negative_slope"};
    case Kind::elu: return {"alpha"};
    case Kind::clamp: return {"min", "max"};
    default: return {};
  }
}

kernels::Activation activation_of(const CallContext& c) {
  const std::string name = c.attrs.has("activation") ? c.attrs.s("activation") : std::string("none");
  const std::optional<Kind> kind = kernels::activation_kind(name);
  if (!kind) c.fail<ValueError>("unknown activation '", name, "'");
  kernels::Activation a{.kind = *kind};
  const std::vector<const char*> wanted = activation_param_names(*kind);
  for (const char* p : {"negative_slope", "alpha", "min", "max"}) {
    const bool needed = std::find_if(wanted.begin(), wanted.end(), [&](const char* w) {
                          return std::string_view(w) == p;
                        }) != wanted.end();
    if (needed != c.attrs.has(p))
      c.fail<ValueError>("activation '", name, "' ", needed ? "needs" : "takes no", " attribute '", p, "'");
  }
  if (!wanted.empty()) a.alpha = c.attrs.f(wanted[0]);
  if (wanted.size() == 2) a.beta = c.attrs.f(wanted[1]);
  return a;
}

}  // namespace baton::ops
