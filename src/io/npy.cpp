// NumPy .npy files (numpy.lib.format):
//   "\x93NUMPY" | u8 major | u8 minor | header length (little-endian u16 for 1.0, u32 for
//   2.0 and 3.0) | header | data
// where the header is the text of a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a newline so that the data starts at a multiple of 64 bytes.
// String tensors are NumPy's unicode arrays ('<U7': 7 UTF-32 code units per element,
// trailing NULs padding the shorter strings), converted from and to UTF-8.
#include "baton/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <vector>

#include "core/atomic_file.h"
#include "core/utf8.h"

namespace baton::npy {
namespace {

static_assert(std::endian::native == std::endian::little, "npy data is read and written little-endian");

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kMaxHeader = size_t(1) << 20;  // numpy's own reader stops at 10,000 bytes
constexpr size_t kMaxRank = 64;                  // numpy's NPY_MAXDIMS
constexpr int kMaxDepth = 16;                    // nesting of tuples and lists in a header
constexpr size_t kMaxValues = 4096;              // literals in a header
constexpr size_t kAlign = 64;                    // numpy aligns the data to 64 bytes

// Where an error comes from: the op ("npy::load"), the name of the bytes (a path; empty for
// to_bytes) and the caller's line.
struct Ctx {
  const char* op;
  const std::string& what;
  SourceLoc loc;
  std::string prefix() const { return what.empty() ? "" : what + ": "; }
  [[noreturn]] void fail(const std::string& why) const { throw IOError(op, prefix() + why, loc); }
};

// `s` for a message: at most `max` characters, bytes other than printable ASCII as \xNN.
std::string excerpt(std::string_view s, size_t max = 60) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return s.size() > max ? out + "..." : out;
}

// A shape as Python writes a tuple: (), (3,), (2, 3).
std::string tuple_text(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += str(i ? ", " : "", shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// --- the header: a Python literal, as far as .npy headers use Python ----------------------

struct Value {
  enum Kind { Str, Int, Bool, None, Tuple, List } kind = None;
  std::string text;          // Str
  int64_t number = 0;        // Int, Bool
  std::vector<Value> items;  // Tuple, List
};
using Dict = std::vector<std::pair<std::string, Value>>;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// What ast.literal_eval gives numpy: a dict of strings to strings, integers, booleans,
// None, tuples and lists. Bounded: kMaxDepth nested sequences, kMaxValues literals.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const Ctx& ctx) : s_(text), ctx_(ctx) {}

  Dict dict() {
    Dict entries;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (eat('}')) break;
      if (!at('\'') && !at('"')) malformed("a quoted key or '}'");
      std::string key = string_literal();
      skip_space();
      expect(':');
      Value v = value(0);
      entries.emplace_back(std::move(key), std::move(v));
      skip_space();
      if (eat(',')) continue;
      if (eat('}')) break;
      malformed("',' or '}'");
    }
    skip_space();
    if (pos_ != s_.size()) malformed("the end of the header after '}'");
    return entries;
  }

 private:
  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool eat(char c) {
    if (!at(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) malformed(str("'", c, "'"));
  }
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }
  [[noreturn]] void malformed(const std::string& expected) const {
    const std::string found = pos_ < s_.size() ? str("\"", excerpt(s_.substr(pos_), 16), "\"") : "the end";
    ctx_.fail(str("malformed header: expected ", expected, " at byte ", pos_, ", found ", found, " in \"",
                  excerpt(s_), "\""));
  }

  Value value(int depth) {
    if (depth > kMaxDepth) ctx_.fail(str("malformed header: nested more than ", kMaxDepth, " deep"));
    if (++values_ > kMaxValues) ctx_.fail(str("malformed header: more than ", kMaxValues, " values"));
    skip_space();
    Value v;
    if (at('\'') || at('"')) {
      v.kind = Value::Str;
      v.text = string_literal();
    } else if (at('(') || at('[')) {
      v = sequence(depth);
    } else if (at('-') || at('+') || (pos_ < s_.size() && is_digit(s_[pos_]))) {
      v.kind = Value::Int;
      v.number = integer();
    } else {
      const size_t start = pos_;
      while (pos_ < s_.size() && is_letter(s_[pos_])) ++pos_;
      const std::string_view word = s_.substr(start, pos_ - start);
      if (word != "True" && word != "False" && word != "None") {
        pos_ = start;
        malformed("a value");
      }
      v.kind = word == "None" ? Value::None : Value::Bool;
      v.number = word == "True";
    }
    return v;
  }

  Value sequence(int depth) {
    const char close = s_[pos_++] == '(' ? ')' : ']';
    Value v;
    v.kind = close == ')' ? Value::Tuple : Value::List;
    bool comma = false;
    for (;;) {
      skip_space();
      if (eat(close)) break;
      v.items.push_back(value(depth + 1));
      skip_space();
      if (eat(',')) {
        comma = true;
        continue;
      }
      if (eat(close)) break;
      malformed(str("',' or '", close, "'"));
    }
    if (v.kind == Value::Tuple && v.items.size() == 1 && !comma) return std::move(v.items[0]);  // (3) is 3
    return v;
  }

  int64_t integer() {
    const size_t start = pos_;
    const bool negative = eat('-');
    if (!negative) eat('+');
    const size_t digits = pos_;
    int64_t n = 0;
    bool overflow = false;
    for (; pos_ < s_.size() && is_digit(s_[pos_]); ++pos_)
      overflow = overflow || __builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, s_[pos_] - '0', &n);
    if (pos_ == digits) malformed("a digit");
    if (overflow)
      ctx_.fail(str("header number ", excerpt(s_.substr(start, pos_ - start)), " does not fit in 64 bits"));
    if (!eat('L')) eat('l');  // a Python 2 long: (3L, 4L)
    return negative ? -n : n;
  }

  std::string string_literal() {
    const char quote = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out += s_[pos_++];
    }
    expect(quote);
    return out;
  }

  std::string_view s_;
  const Ctx& ctx_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

// --- from the header to a layout -------------------------------------------------------

struct Layout {
  std::string descr;
  DType dtype = f32;
  size_t text_units = 0;  // string: UTF-32 code units per element
  bool swap = false;     // big-endian data
  bool fortran = false;  // column-major data
  Shape shape;
  size_t data_offset = 0;
  size_t nbytes = 0;
  size_t item_bytes() const { return dtype == DType::string ? 4 * text_units : dtype_size(dtype); }
  // The shape the data has when read in C order.
  Shape stored_shape() const {
    if (!fortran) return shape;
    Shape s = shape;
    std::reverse(s.begin(), s.end());
    return s;
  }
};

// The name of a valid NumPy dtype baton has no tensors of, by its descr without byte order.
std::optional<std::string_view> unsupported_dtype(std::string_view code) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"f12", "float96"},  {"f16", "float128"},  {"c8", "complex64"},  {"c16", "complex128"}, {"c24", "complex192"},
      {"c32", "complex256"}, {"O", "object"},    {"O8", "object"}};
  for (auto& [c, name] : kNames)
    if (code == c) return name;
  const auto digits = [](std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); };
  if (code.size() > 1 && digits(code.substr(1))) {
    if (code[0] == 'S') return "bytes";
    if (code[0] == 'V') return "void";
  }
  if (code.starts_with("M8") || code.starts_with("m8")) {
    std::string_view unit = code.substr(2);
    if (unit.empty() || (unit.size() > 2 && unit.front() == '[' && unit.back() == ']'))
      return code[0] == 'M' ? "datetime64" : "timedelta64";
  }
  return std::nullopt;
}

void decode_descr(const Value& v, const Ctx& ctx, Layout& l) {
  if (v.kind == Value::List)
    throw DTypeError(ctx.op, ctx.prefix() + "baton has no structured (record) tensors (descr is a list of fields)",
                     ctx.loc);
  if (v.kind != Value::Str) ctx.fail("'descr' is not a string");
  l.descr = v.text;
  std::string_view code = l.descr;
  char order = '=';
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code.remove_prefix(1);
  }
  static constexpr std::pair<std::string_view, DType> kBaton[] = {
      {"b1", DType::b8},  {"i4", DType::i32}, {"i8", DType::i64}, {"f4", DType::f32}, {"f8", DType::f64},
      {"u1", DType::u8},  {"i1", DType::i8},  {"i2", DType::i16}, {"u2", DType::u16}, {"u4", DType::u32},
      {"u8", DType::u64}, {"f2", DType::f16}};
  if (code.size() > 1 && code[0] == 'U' && std::all_of(code.begin() + 1, code.end(), is_digit) && code.size() < 10) {
    l.dtype = DType::string;
    l.text_units = size_t(std::stoull(std::string(code.substr(1))));
    l.swap = order == '>';
    return;
  }
  for (auto& [c, dtype] : kBaton)
    if (code == c) {
      l.dtype = dtype;
      l.swap = order == '>' && dtype_size(dtype) > 1;
      return;
    }
  if (auto name = unsupported_dtype(code))
    throw DTypeError(ctx.op, str(ctx.prefix(), "baton has no ", *name, " tensors (descr '", excerpt(l.descr),
                                 "'); it reads bool, (u)int8-64, float16, float32 and float64"),
                     ctx.loc);
  ctx.fail(str("unknown descr '", excerpt(l.descr), "'"));
}

Shape decode_shape(const Value& v, const Ctx& ctx) {
  if (v.kind != Value::Tuple) ctx.fail("'shape' is not a tuple");
  if (v.items.size() > kMaxRank)
    ctx.fail(str("'shape' has ", v.items.size(), " dims, more than NumPy's ", kMaxRank));
  Shape shape;
  for (const Value& d : v.items) {
    if (d.kind != Value::Int) ctx.fail("'shape' holds something other than integers");
    shape.push_back(d.number);
  }
  for (int64_t d : shape)
    if (d < 0) ctx.fail(str("negative dim in shape ", tuple_text(shape)));
  return shape;
}

// Reads the preamble and header from `head` (the first bytes; all of the header at least)
// of `total` bytes and checks that exactly the data the header describes follows.
Layout parse_layout(std::string_view head, uint64_t total, const Ctx& ctx) {
  if (total == 0) ctx.fail("is empty, not a .npy file");
  if (head.size() < kMagic.size() || head.substr(0, kMagic.size()) != kMagic)
    ctx.fail("not a .npy file (bad magic number)");
  if (head.size() < 8) ctx.fail(str("truncated within the format version (", total, " bytes)"));
  const unsigned major = static_cast<unsigned char>(head[6]), minor = static_cast<unsigned char>(head[7]);
  if (major < 1 || major > 3 || minor != 0)
    ctx.fail(str("format version ", major, ".", minor, " is not supported (1.0, 2.0 and 3.0 are)"));
  const size_t len_bytes = major == 1 ? 2 : 4, preamble = 8 + len_bytes;
  if (head.size() < preamble) ctx.fail(str("truncated within the header length (", total, " bytes)"));
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= uint64_t(static_cast<unsigned char>(head[8 + i])) << (8 * i);
  if (header_len > total - preamble)
    ctx.fail(str("truncated: the header of ", header_len, " bytes goes past the end (", total, " bytes in all)"));
  if (header_len > kMaxHeader) ctx.fail(str("implausible header length ", header_len, " (over 1 MiB)"));
  if (head.size() < preamble + header_len) ctx.fail("truncated within the header (the file shrank)");

  Layout l;
  l.data_offset = preamble + size_t(header_len);
  const Dict dict = HeaderParser(head.substr(preamble, header_len), ctx).dict();
  const Value *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (auto& [key, v] : dict) {
    const Value** slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran : key == "shape" ? &shape : nullptr;
    if (!slot)
      ctx.fail(str("unexpected key '", excerpt(key), "' in the header ('descr', 'fortran_order' and 'shape' belong)"));
    if (*slot) ctx.fail(str("duplicate key '", key, "' in the header"));
    *slot = &v;
  }
  if (!descr) ctx.fail("the header lacks 'descr'");
  if (!fortran) ctx.fail("the header lacks 'fortran_order'");
  if (!shape) ctx.fail("the header lacks 'shape'");
  if (fortran->kind != Value::Bool) ctx.fail("'fortran_order' is not True or False");
  l.fortran = fortran->number != 0;
  l.shape = decode_shape(*shape, ctx);
  decode_descr(*descr, ctx, l);

  // Every product of dims (elements, and the strides, which skip zero dims) and the byte
  // count must fit, so (2**62, 4) is an error rather than a wrapped-around 0.
  int64_t numel = 1, strides = 1;
  uint64_t nbytes = 0;
  bool overflow = false;
  for (int64_t d : l.shape)
    overflow = overflow || __builtin_mul_overflow(numel, d, &numel) ||
               __builtin_mul_overflow(strides, std::max<int64_t>(d, 1), &strides);
  overflow = overflow || __builtin_mul_overflow(uint64_t(numel), uint64_t(l.item_bytes()), &nbytes) ||
             nbytes > uint64_t(INT64_MAX);
  const std::string what = str("shape ", tuple_text(l.shape), " of '", excerpt(l.descr), "'");
  if (overflow) ctx.fail(str(what, " has more elements or bytes than 64 bits count"));
  // Strings of no code units take no bytes in the file but an object each in memory.
  if (l.dtype == DType::string && l.text_units == 0 && numel > (int64_t(1) << 20))
    ctx.fail(str(what, " declares over 2^20 empty strings, which the file does not back"));
  const uint64_t present = total - l.data_offset;
  if (present < nbytes) ctx.fail(str("truncated: ", what, " needs ", nbytes, " data bytes, ", present, " present"));
  if (present > nbytes) ctx.fail(str(present - nbytes, " unexpected bytes after the data (", what, " needs ", nbytes, ")"));
  l.nbytes = size_t(nbytes);
  return l;
}

// The string tensor of NumPy unicode data (of l.stored_shape()): each element's code units
// in the file's byte order, its trailing NULs dropped, as UTF-8.
Tensor decode_text(const char* data, const Layout& l, const Ctx& ctx) {
  Tensor t = empty(l.stored_shape(), DType::string);
  std::string* out = t.data<std::string>();
  std::vector<char32_t> units(l.text_units);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (units.empty()) continue;  // '<U0': every string empty
    std::memcpy(units.data(), data + size_t(i) * l.item_bytes(), l.item_bytes());
    if (l.swap)
      for (char32_t& u : units) u = __builtin_bswap32(uint32_t(u));
    size_t length = units.size();
    while (length > 0 && units[length - 1] == 0) --length;
    for (size_t k = 0; k < length; ++k) {
      if (!detail::is_scalar_value(units[k]))
        ctx.fail(str("string element ", i, " holds the code ", uint32_t(units[k]), ", which is no Unicode character"));
      detail::append_utf8(units[k], out[i]);
    }
  }
  return t;
}

// NumPy unicode data for a contiguous string tensor: as many code units per element as
// its longest string has code points (at least one), zero-padded; `units` gets that count.
std::string encode_text(const Tensor& c, const Ctx& ctx, size_t& units) {
  std::vector<std::u32string> texts;
  units = 1;
  const std::string* in = c.data<std::string>();
  for (int64_t i = 0; i < c.numel(); ++i) {
    std::u32string& text = texts.emplace_back();
    for (size_t at = 0; at < in[i].size();) {
      auto [cp, n] = detail::decode_utf8(in[i], at);
      if (n == 0)
        throw ValueError(ctx.op, str(ctx.prefix(), "string element ", i, " is not valid UTF-8 (byte ", at,
                                     "), which NumPy's unicode arrays cannot hold"), ctx.loc);
      text += cp;
      at += n;
    }
    units = std::max(units, text.size());
  }
  std::string out;
  out.reserve(texts.size() * units * 4);
  for (const std::u32string& text : texts)
    for (size_t k = 0; k < units; ++k) {
      const uint32_t u = k < text.size() ? uint32_t(text[k]) : 0;
      for (int b = 0; b < 4; ++b) out += char((u >> (8 * b)) & 0xff);
    }
  return out;
}

// The tensor from its data as stored (`raw`, of l.stored_shape(), modified in place).
Tensor finish(Tensor raw, const Layout& l) {
  auto* p = static_cast<unsigned char*>(raw.raw_data());
  const size_t item = dtype_size(l.dtype);
  if (l.swap && l.dtype != DType::string)
    for (size_t i = 0; i < l.nbytes; i += item) std::reverse(p + i, p + i + item);
  if (l.dtype == DType::b8)  // any byte but 0 is True; a bool must hold 0 or 1
    for (size_t i = 0; i < l.nbytes; ++i) p[i] = p[i] != 0;
  if (!l.fortran || raw.dim() < 2) return raw;
  Shape reversed(size_t(raw.dim()));
  for (int64_t i = 0; i < raw.dim(); ++i) reversed[size_t(i)] = raw.dim() - 1 - i;
  return raw.permute(reversed).contiguous();
}

// --- writing ---------------------------------------------------------------------------

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::b8: return "|b1";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::u8: return "|u1";
    case DType::i8: return "|i1";
    case DType::i16: return "<i2";
    case DType::u16: return "<u2";
    case DType::u32: return "<u4";
    case DType::u64: return "<u8";
    case DType::f16: return "<f2";
    case DType::bf16: break;  // serialize refuses it
    case DType::string: break;  // serialize writes its width
  }
  return "?";
}

std::string serialize(const Tensor& t, const Ctx& ctx) {
  if (!t.defined()) throw ValueError(ctx.op, ctx.prefix() + "the tensor is undefined", ctx.loc);
  if (t.is_symbolic() || !sym::is_static(t.shape()))
    throw ValueError(ctx.op, str(ctx.prefix(), "the tensor is symbolic (a value of a graph being built, shape ",
                                 t.shape(), ") and has no data; save what Session::run returns"),
                     ctx.loc);
  if (size_t(t.dim()) > kMaxRank)
    throw ValueError(ctx.op, str(ctx.prefix(), "the tensor has ", t.dim(), " dims, more than NumPy's ", kMaxRank),
                     ctx.loc);
  if (t.dtype() == DType::bf16)
    throw DTypeError(ctx.op, ctx.prefix() + "NumPy has no bfloat16 dtype; cast the tensor to f32 first", ctx.loc);
  const Tensor c = t.detach().contiguous();
  size_t text_units = 0;
  const std::string text = c.dtype() == DType::string ? encode_text(c, ctx, text_units) : std::string();
  const std::string descr = c.dtype() == DType::string ? str("<U", text_units) : std::string(descr_of(c.dtype()));
  const std::string_view data = c.dtype() == DType::string ? std::string_view(text)
                                                           : std::string_view(static_cast<const char*>(c.raw_data()), c.nbytes());
  const std::string dict = str("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", tuple_text(c.shape()), ", }");
  // Version 1.0 when the header's length fits in its u16, else 2.0.
  size_t preamble = 10;
  const auto padded = [&] { return dict.size() + 1 + (kAlign - (preamble + dict.size() + 1) % kAlign) % kAlign; };
  if (padded() > UINT16_MAX) preamble = 12;
  const size_t header_len = padded();
  std::string out;
  out.reserve(preamble + header_len + data.size());
  out += kMagic;
  out += char(preamble == 10 ? 1 : 2);
  out += char(0);
  for (size_t i = 0; i < preamble - 8; ++i) out += char((header_len >> (8 * i)) & 0xff);
  out += dict;
  out.append(header_len - dict.size() - 1, ' ');
  out += '\n';
  out.append(data);
  return out;
}

// --- files -----------------------------------------------------------------------------

// Runs `body`, turning what is not a baton::Error (out of memory, a library's exception)
// into an IOError naming the source.
template <class F> auto guarded(const Ctx& ctx, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    ctx.fail("out of memory");
  } catch (const std::exception& e) {
    ctx.fail(e.what());
  }
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads up to n bytes; fewer only at the end of the file.
size_t read_up_to(int fd, char* dst, size_t n, const Ctx& ctx) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, dst + done, std::min<size_t>(n - done, size_t(1) << 30));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) ctx.fail(str("read failed (", std::strerror(errno), ")"));
    if (r == 0) break;
    done += size_t(r);
  }
  return done;
}

// Reads the header first and allocates the tensor only once the file's real size matches
// it; the data is read straight into the tensor.
// The data after the header into `into` (l.nbytes): what `head` holds of it, then the rest
// of the file, which must end there.
void read_data(int fd, const std::string& head, const Layout& l, char* into, const Ctx& ctx) {
  const size_t have = std::min(head.size() - l.data_offset, l.nbytes);
  if (have > 0) std::memcpy(into, head.data() + l.data_offset, have);
  if (read_up_to(fd, into + have, l.nbytes - have, ctx) != l.nbytes - have) ctx.fail("truncated (the file shrank)");
  char extra;
  if (read_up_to(fd, &extra, 1, ctx) != 0) ctx.fail("unexpected bytes after the data (the file grew)");
}

Tensor read_npy(const Ctx& ctx) {
  const Fd f{::open(ctx.what.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};  // a FIFO must not block
  if (f.fd < 0) ctx.fail(str("cannot open (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) ctx.fail(str("cannot stat (", std::strerror(errno), ")"));
  if (S_ISDIR(st.st_mode)) ctx.fail("is a directory, not a .npy file");
  if (!S_ISREG(st.st_mode)) ctx.fail("is not a regular file");
  const uint64_t total = uint64_t(st.st_size);
  std::string head(size_t(std::min<uint64_t>(total, 12 + kMaxHeader)), '\0');
  if (read_up_to(f.fd, head.data(), head.size(), ctx) != head.size()) ctx.fail("truncated (the file shrank)");
  const Layout l = parse_layout(head, total, ctx);
  if (l.dtype == DType::string) {  // read as bytes first, then decoded
    std::string text(l.nbytes, '\0');
    read_data(f.fd, head, l, text.data(), ctx);
    return finish(decode_text(text.data(), l, ctx), l);
  }
  Tensor raw = empty(l.stored_shape(), l.dtype);
  read_data(f.fd, head, l, static_cast<char*>(raw.raw_data()), ctx);
  return finish(std::move(raw), l);
}

}  // namespace

Tensor load(const std::string& path, SourceLoc loc) {
  const Ctx ctx{"npy::load", path, loc};
  return guarded(ctx, [&] { return read_npy(ctx); });
}

Tensor parse(std::string_view bytes, const std::string& what, SourceLoc loc) {
  const Ctx ctx{"npy::parse", what, loc};
  return guarded(ctx, [&] {
    const Layout l = parse_layout(bytes, bytes.size(), ctx);
    const char* data = bytes.data() + l.data_offset;
    return finish(l.dtype == DType::string ? decode_text(data, l, ctx) : from_buffer(data, l.dtype, l.stored_shape()), l);
  });
}

void save(const std::string& path, const Tensor& t, SourceLoc loc) {
  const Ctx ctx{"npy::save", path, loc};
  guarded(ctx, [&] { detail::write_file_atomically(path, serialize(t, ctx), "npy::save"); });
}

std::string to_bytes(const Tensor& t) {
  static const std::string kNoName;
  const Ctx ctx{"npy::to_bytes", kNoName, SourceLoc::current()};
  return guarded(ctx, [&] { return serialize(t, ctx); });
}

}  // namespace baton::npy
