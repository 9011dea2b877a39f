// The process-wide table of symbolic dims (see sym:: in baton/shape.h).
//
// A symbol is stored in an int64_t as -((id << 32) | kTag). The tag in the low 32 bits
// is what makes stray arithmetic detectable: adding a small number or multiplying by
// one other than 1 changes the low bits, so the result is no longer a valid symbol.
// Every entry is a monomial: an integer coefficient times a product of plain symbols
// (`batch`, `784*batch`, `h*w`); interning makes equal expressions equal ints.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <deque>
#include <map>
#include <mutex>

#include "baton/error.h"
#include "baton/shape.h"

namespace baton::sym {
namespace {

constexpr int64_t kTag = 0x5EB01C5D;
constexpr int64_t kLowMask = 0xFFFFFFFF;
bool is_symbol_bits(int64_t d) {
  return d < 0 && d != INT64_MIN && ((-d) & kLowMask) == kTag;  // -INT64_MIN would overflow
}

// Dim arithmetic that would wrap around int64 is a ShapeError, never a wrong size.
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw ShapeError("symbol", str("dim product ", a, " * ", b, " does not fit in an int64"), SourceLoc::current());
  return out;
}
int64_t checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw ShapeError("symbol", str("dim sum ", a, " + ", b, " does not fit in an int64"), SourceLoc::current());
  return out;
}

// Symbols are interned for the life of the process; a bound keeps a program that makes
// endless distinct ones (graph text from a hostile file) from growing it without limit.
constexpr size_t kMaxSymbols = size_t(1) << 20;
constexpr int kMaxDegree = 16;

// coefficient * product of (plain symbol id)^exponent; factors sorted by id.
struct Monomial {
  int64_t coeff = 1;
  std::vector<std::pair<int64_t, int>> factors;
  auto operator<=>(const Monomial&) const = default;
};

class Table {
 public:
  int64_t intern_name(std::string_view name) {
    std::lock_guard lock(mutex_);
    auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
    check_room();
    const int64_t id = int64_t(entries_.size());
    Monomial m{1, {{id, 1}}};
    entries_.push_back({std::string(name), m});
    by_name_.emplace(std::string(name), encode(id));
    by_monomial_.emplace(m, encode(id));
    return encode(id);
  }

  // A plain symbol named `stem`_N, for the first N no symbol has been called yet.
  int64_t intern_fresh(std::string_view stem) {
    std::string name;
    {
      std::lock_guard lock(mutex_);
      do name = str(stem, "_", ++fresh_counter_);
      while (by_name_.count(name));
    }
    return intern_name(name);
  }

  // A plain number when the monomial has no factors, else its interned symbol.
  int64_t intern(const Monomial& m) {
    if (m.factors.empty() || m.coeff == 0) return m.coeff == 0 ? 0 : m.coeff;
    std::lock_guard lock(mutex_);
    auto it = by_monomial_.find(m);
    if (it != by_monomial_.end()) return it->second;
    check_room();
    const int64_t id = int64_t(entries_.size());
    entries_.push_back({render(m), m});
    by_monomial_.emplace(m, encode(id));
    return encode(id);
  }

  Monomial monomial(int64_t d) const {
    if (d >= 0) return {d, {}};
    std::lock_guard lock(mutex_);
    if (!is_symbol_bits(d) || decode(d) >= int64_t(entries_.size()))
      throw ShapeError("symbol", str("dim ", d, " is neither a size nor a symbol"), SourceLoc::current());
    return entries_[size_t(decode(d))].monomial;
  }
  std::string name(int64_t d) const {
    std::lock_guard lock(mutex_);
    return entries_.at(size_t(decode(d))).name;
  }
  bool known(int64_t d) const {
    std::lock_guard lock(mutex_);
    return decode(d) < int64_t(entries_.size());
  }

 private:
  struct Entry {
    std::string name;
    Monomial monomial;
  };
  void check_room() const {  // caller holds the lock
    if (entries_.size() >= kMaxSymbols)
      throw ShapeError("symbol", str("more than ", kMaxSymbols, " distinct symbolic dims"), SourceLoc::current());
  }
  static int64_t encode(int64_t id) { return -((id << 32) | kTag); }
  static int64_t decode(int64_t d) { return (-d) >> 32; }
  std::string render(const Monomial& m) const {  // caller holds the lock
    std::string s;
    for (auto [id, exp] : m.factors)
      for (int i = 0; i < exp; ++i) s += (s.empty() ? "" : "*") + entries_[size_t(id)].name;
    if (m.coeff != 1) s = std::to_string(m.coeff) + "*" + s;
    return s;
  }

  mutable std::mutex mutex_;
  int64_t fresh_counter_ = 0;
  std::deque<Entry> entries_;
  std::map<std::string, int64_t, std::less<>> by_name_;
  std::map<Monomial, int64_t> by_monomial_;
};

Table& table() {
  static auto* t = new Table;  // never destroyed: shapes may outlive static destructors
  return *t;
}

// The factor of symbol `id` in a monomial's factors, or end(). A function rather than a
// lambda capturing a structured binding, which clang rejects under -fopenmp.
std::vector<std::pair<int64_t, int>>::iterator find_factor(std::vector<std::pair<int64_t, int>>& factors,
                                                           int64_t id) {
  return std::find_if(factors.begin(), factors.end(), [id](const auto& f) { return f.first == id; });
}

Monomial times(Monomial a, const Monomial& b) {
  a.coeff = checked_mul(a.coeff, b.coeff);
  for (auto [id, exp] : b.factors) {
    auto it = find_factor(a.factors, id);
    if (it != a.factors.end()) it->second += exp;
    else a.factors.emplace_back(id, exp);
  }
  int degree = 0;
  for (auto [id, exp] : a.factors) degree += exp;
  if (degree > kMaxDegree)  // no real shape multiplies this many unknown sizes
    throw ShapeError("symbol", str("a symbolic dim with more than ", kMaxDegree, " symbolic factors"),
                     SourceLoc::current());
  std::sort(a.factors.begin(), a.factors.end());
  return a;
}

}  // namespace

bool is_symbol(int64_t d) { return is_symbol_bits(d); }
bool is_valid_dim(int64_t d) { return d >= 0 || (is_symbol(d) && table().known(d)); }

// A letter or '_', then letters, digits or '_'.
bool is_name(std::string_view s) {
  auto word_char = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) && std::all_of(s.begin(), s.end(), word_char);
}

int64_t named(std::string_view name) {
  if (!is_name(name))
    throw ValueError("symbol", str("'", name, "' is not a valid dim name (a letter or '_', then "
                                   "letters, digits or '_')"), SourceLoc::current());
  return table().intern_name(name);
}

int64_t fresh(std::string_view stem) {
  if (!is_name(stem))
    throw ValueError("symbol", str("'", stem, "' is not a valid dim name"), SourceLoc::current());
  return table().intern_fresh(stem);
}

std::string to_string(int64_t d) {
  if (d >= 0) return std::to_string(d);
  if (is_valid_dim(d)) return table().name(d);
  return "<invalid dim " + std::to_string(d) + ">";
}

int64_t parse(std::string_view text) {
  Monomial m;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find('*', start), text.size());
    std::string_view token = text.substr(start, end - start);
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec == std::errc() && ptr == token.data() + token.size() && value >= 0)
      m.coeff = checked_mul(m.coeff, value);
    else
      m = times(m, table().monomial(named(token)));
    start = end + 1;
  }
  return table().intern(m);
}

bool is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](int64_t d) { return d >= 0; });
}

int64_t mul(int64_t a, int64_t b) {
  if (a >= 0 && b >= 0) return checked_mul(a, b);
  return table().intern(times(table().monomial(a), table().monomial(b)));
}

int64_t add(int64_t a, int64_t b) {
  if (a >= 0 && b >= 0) return checked_add(a, b);
  if (a == 0 || b == 0) return a == 0 ? b : a;
  Monomial ma = table().monomial(a), mb = table().monomial(b);
  if (ma.factors != mb.factors)
    throw ShapeError("symbol", str("cannot add dims ", to_string(a), " and ", to_string(b),
                                   ": only multiples of one symbolic product add up"),
                     SourceLoc::current());
  ma.coeff = checked_add(ma.coeff, mb.coeff);
  return table().intern(ma);
}

std::optional<int64_t> sub(int64_t a, int64_t b) {
  if (a >= 0 && b >= 0) return a >= b ? std::optional(a - b) : std::nullopt;
  if (b == 0) return a;
  Monomial ma = table().monomial(a), mb = table().monomial(b);
  if (ma.factors != mb.factors || ma.coeff < mb.coeff) return std::nullopt;
  ma.coeff -= mb.coeff;
  return table().intern(ma);
}

std::optional<int64_t> div_exact(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (a >= 0 && b >= 0) return a % b == 0 ? std::optional(a / b) : std::nullopt;
  Monomial ma = table().monomial(a), mb = table().monomial(b);
  if (ma.coeff % mb.coeff != 0) return std::nullopt;
  ma.coeff /= mb.coeff;
  for (auto [id, exp] : mb.factors) {
    auto it = find_factor(ma.factors, id);
    if (it == ma.factors.end() || it->second < exp) return std::nullopt;
    if ((it->second -= exp) == 0) ma.factors.erase(it);
  }
  return table().intern(ma);
}

// --- Bindings ---
bool Bindings::bind(int64_t symbol, int64_t size) {
  if (auto old = lookup(symbol)) return *old == size;
  sizes_.emplace_back(symbol, size);
  return true;
}

std::optional<int64_t> Bindings::lookup(int64_t symbol) const {
  for (auto [s, size] : sizes_)
    if (s == symbol) return size;
  return std::nullopt;
}

int64_t Bindings::eval(int64_t d) const {
  if (d >= 0) return d;
  if (auto size = lookup(d)) return *size;
  if (!is_valid_dim(d)) throw ShapeError("symbol", str("invalid dim ", d), SourceLoc::current());
  Monomial m = table().monomial(d);
  int64_t value = m.coeff;
  for (auto [id, exp] : m.factors) {
    const int64_t plain = -((id << 32) | kTag);
    auto size = lookup(plain);
    if (!size)
      throw ShapeError("symbol", str("dim '", to_string(plain), "' has no size in this run"),
                       SourceLoc::current());
    for (int i = 0; i < exp; ++i) value = checked_mul(value, *size);
  }
  sizes_.emplace_back(d, value);
  return value;
}

Factors factors(int64_t d) {
  const Monomial m = table().monomial(d);
  Factors f{m.coeff, {}};
  for (auto [id, exp] : m.factors)
    for (int i = 0; i < exp; ++i) f.symbols.push_back(-((id << 32) | kTag));
  return f;
}

Shape Bindings::eval(const Shape& s) const {
  Shape out = s;
  for (int64_t& d : out) d = eval(d);
  return out;
}

}  // namespace baton::sym
