// ngram_counts: how often each n-gram of a pool occurs in rows of token ids (the counting
// of ONNX TfIdfVectorizer; its weighting is done by the importer with ordinary ops).
//
// The pool becomes a trie once per plan (or once per eager call): a node per prefix, an
// edge per (node, token), and at the node where a counted n-gram ends its output
// coordinate. Each row is then walked from every start position at every skip distance
// d = 1 .. max_skip + 1, following tokens s, s + d, s + 2d, ... down the trie; 1-grams
// count only at d = 1 (they are the same at every distance). Rows are independent and run
// in parallel. Integer ids in, f32 counts out: no gradient.
//
//   %1 = ngram_counts(%x) {tokens=[high, low, ...], level_starts=[0, 4], coordinates=[...],
//                          min_length=2, max_length=2, max_skip=0}
#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "baton/ops.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/loops.h"
#include "ops/common.h"

namespace baton::ops {
namespace {

// Ints attributes may hold symbolic dims, which are reserved negative numbers; token ids
// may be any int64. So the "tokens" attribute holds each token as two non-negative halves
// (high and low 32 bits), which never read as a symbol.
std::vector<int64_t> token_halves(const std::vector<int64_t>& tokens) {
  std::vector<int64_t> halves;
  halves.reserve(tokens.size() * 2);
  for (int64_t t : tokens) halves.push_back(int64_t(uint64_t(t) >> 32)), halves.push_back(int64_t(uint64_t(t) & 0xFFFFFFFFu));
  return halves;
}

std::vector<int64_t> tokens_of(const CallContext& c, const std::vector<int64_t>& halves) {
  if (halves.size() % 2 != 0) c.fail<ValueError>("tokens must hold (high, low) halves, got ", halves.size(), " values");
  std::vector<int64_t> tokens(halves.size() / 2);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int64_t((uint64_t(halves[2 * i]) << 32) | (uint64_t(halves[2 * i + 1]) & 0xFFFFFFFFu));
  return tokens;
}

NgramPool pool_of(const CallContext& c) {
  const Attrs& a = c.attrs;
  return {tokens_of(c, a.ints("tokens")), a.ints("level_starts"), a.ints("coordinates"),
          a.i("min_length"), a.i("max_length"), a.i("max_skip")};
}

// The end of level n (1-based) in the pool's tokens.
int64_t level_end(const NgramPool& p, size_t n) {
  return n < p.level_starts.size() ? p.level_starts[n] : int64_t(p.tokens.size());
}

// Output coordinates stay below this, so that an output row's width is an int.
constexpr int64_t kMaxCoordinate = std::numeric_limits<int32_t>::max();

// Checks the layout of the pool; returns the output width, max(coordinates) + 1.
int64_t check_pool(const CallContext& c, const NgramPool& p) {
  if (p.min_length < 1 || p.max_length < p.min_length)
    c.fail<ValueError>("needs 1 <= min_length <= max_length, got ", p.min_length, " and ", p.max_length);
  if (p.max_skip < 0) c.fail<ValueError>("max_skip must not be negative, got ", p.max_skip);
  int64_t grams = 0;
  for (size_t n = 1; n <= p.level_starts.size(); ++n) {
    const int64_t begin = p.level_starts[n - 1], end = level_end(p, n);
    if (begin < 0 || end < begin || end > int64_t(p.tokens.size()))
      c.fail<ValueError>("level_starts must rise within the pool of ", p.tokens.size(), " tokens; level ", n,
                         " spans [", begin, ", ", end, ")");
    if ((end - begin) % int64_t(n) != 0)
      c.fail<ValueError>("level ", n, " holds ", end - begin, " tokens, not a whole number of ", n, "-grams");
    grams += (end - begin) / int64_t(n);
  }
  if (int64_t(p.coordinates.size()) != grams)
    c.fail<ValueError>("the pool holds ", grams, " n-grams but ", p.coordinates.size(), " coordinates");
  if (grams == 0) c.fail<ValueError>("the pool holds no n-grams");
  for (int64_t k : p.coordinates)
    if (k < 0 || k >= kMaxCoordinate)
      c.fail<ValueError>("coordinates must lie in [0, ", kMaxCoordinate, "), got ", k);
  return *std::max_element(p.coordinates.begin(), p.coordinates.end()) + 1;
}

TensorMeta infer(const InferContext& c) {
  const Tensor& x = c.input(0);
  if (x.dtype() != i32 && x.dtype() != i64) c.fail<DTypeError>("expects i32 or i64 token ids, got ", x.dtype());
  if (x.dim() != 1 && x.dim() != 2) c.fail("expects ids of shape [C] or [B, C]");
  const int64_t width = check_pool(c, pool_of(c));
  return {f32, x.dim() == 1 ? Shape{width} : Shape{x.shape()[0], width}};
}

// The pool's counted n-grams as a trie. Node 0 is the root.
class NgramTrie {
 public:
  explicit NgramTrie(const NgramPool& p) : coordinate_(1, -1) {
    size_t id = 0;  // the pool's n-gram number, across all levels
    for (size_t n = 1; n <= p.level_starts.size(); ++n) {
      const bool counted = int64_t(n) >= p.min_length && int64_t(n) <= p.max_length;
      for (int64_t at = p.level_starts[n - 1]; at + int64_t(n) <= level_end(p, n); at += int64_t(n), ++id)
        if (counted) coordinate_[insert(&p.tokens[size_t(at)], n)] = p.coordinates[id];
    }
  }

  // The child of `node` along `token`, or -1.
  int64_t child(int64_t node, int64_t token) const {
    auto it = edges_.find(Edge{node, token});
    return it == edges_.end() ? -1 : it->second;
  }
  // Where the n-gram ending at `node` is counted, or -1 when none does.
  int64_t coordinate(int64_t node) const { return coordinate_[size_t(node)]; }

 private:
  struct Edge {
    int64_t node, token;
    bool operator==(const Edge&) const = default;
  };
  struct EdgeHash {
    size_t operator()(const Edge& e) const {
      return std::hash<int64_t>()(e.token) ^ (std::hash<int64_t>()(e.node) * 0x9e3779b97f4a7c15ULL);
    }
  };

  int64_t insert(const int64_t* gram, size_t n) {
    int64_t node = 0;
    for (size_t i = 0; i < n; ++i) {
      auto [it, added] = edges_.try_emplace(Edge{node, gram[i]}, int64_t(coordinate_.size()));
      if (added) coordinate_.push_back(-1);
      node = it->second;
    }
    return node;
  }

  std::unordered_map<Edge, int64_t, EdgeHash> edges_;
  std::vector<int64_t> coordinate_;
};

// Adds the counts of one row of ids to `counts`.
template <class T>
void count_row(const NgramTrie& trie, const NgramPool& p, const T* ids, int64_t length, float* counts) {
  // A distance of `length` or more leaves room for 1-grams only, which count at d = 1.
  const int64_t farthest = std::min(p.max_skip, length) + 1;
  for (int64_t d = 1; d <= farthest; ++d) {
    const int64_t shortest = d == 1 ? p.min_length : std::max<int64_t>(p.min_length, 2);
    if (shortest > p.max_length) break;
    for (int64_t start = 0; start < length; ++start) {
      int64_t node = 0;
      for (int64_t n = 1, at = start; n <= p.max_length && at < length; ++n, at += d) {
        node = trie.child(node, int64_t(ids[at]));
        if (node < 0) break;
        if (n >= shortest && trie.coordinate(node) >= 0) counts[trie.coordinate(node)] += 1;
      }
    }
  }
}

// The kernel's parameters: the pool and its trie, made once per plan specialization (an
// eager call makes them on each call).
struct NgramParams {
  NgramPool pool;
  NgramTrie trie;
};
NgramParams ngram_params(const CallContext& c) {
  NgramPool pool = pool_of(c);
  NgramTrie trie(pool);
  return {std::move(pool), std::move(trie)};
}

void kernel(const KernelContext& c) {
  const Tensor x = kernels::dense(c.input(0));
  const Tensor& out = c.output();
  std::fill_n(out.data<float>(), out.numel(), 0.0f);
  const NgramParams& params = c.params<NgramParams>();
  const NgramPool& p = params.pool;
  const NgramTrie* trie = &params.trie;
  const int64_t rows = x.dim() == 1 ? 1 : x.shape()[0], length = x.shape()[size_t(x.dim() - 1)];
  const int64_t width = out.shape()[size_t(out.dim() - 1)];
  auto run = [&](const auto* ids) {
    kernels::parallel_range(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) count_row(*trie, p, ids + r * length, length, out.data<float>() + r * width);
    }, kernels::grain_for(length * (std::min(p.max_skip, length) + 1)));
  };
  if (x.dtype() == i32) run(x.data<int32_t>());
  else run(x.data<int64_t>());
}

}  // namespace

BATON_OP(ngram_counts_op, "ngram_counts")
    .inputs(1)
    .ints_attr("tokens")
    .ints_attr("level_starts")
    .ints_attr("coordinates")
    .int_attr("min_length")
    .int_attr("max_length")
    .int_attr("max_skip")
    .fusion(Fusion::Opaque)
    .infer(infer)
    .params(ngram_params)
    .cpu(kernel)
    .cost([](const CallContext& c, std::span<const TensorMeta> out) {
      const double steps = double(c.input(0).shape()[size_t(c.input(0).dim() - 1)]);
      const double walks = double(c.input(0).numel()) * std::min(double(c.attrs.i("max_skip")) + 1, steps + 1);
      return Cost{walks * std::min(double(c.attrs.i("max_length")), steps + 1),
                  double(c.input(0).numel() * int64_t(dtype_size(c.input(0).dtype())) + out[0].shape.numel() * 4)};
    });

}  // namespace baton::ops

namespace baton {

Tensor ngram_counts(const Tensor& x, const NgramPool& pool, SourceLoc loc) {
  return ops::call(ops::ngram_counts_op, {x},
                   {{"tokens", ops::token_halves(pool.tokens)},
                    {"level_starts", pool.level_starts},
                    {"coordinates", pool.coordinates},
                    {"min_length", pool.min_length},
                    {"max_length", pool.max_length},
                    {"max_skip", pool.max_skip}},
                   loc);
}

}  // namespace baton
