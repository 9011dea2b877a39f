// Format (little-endian):
//   version 2: "BATONCKP" | u32 2 | u64 meta_count | meta_count pairs of
//              { u32 key_len | key | u32 value_len | value } | u64 count | entries | u32 CRC
//   version 1: "BATONCKP" | u32 1 | u64 count | entries | u32 CRC
// where an entry is { u32 name_len | name | u8 dtype | u32 rank | i64 dims[rank] | u64 nbytes |
// data } and the CRC-32 covers all preceding bytes. Checkpoints keep the optimizer's kind in
// the metadata as "optimizer.kind".
#include "baton/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <new>
#include <set>

#include "baton/ops.h"
#include "baton/optim.h"
#include "core/atomic_file.h"

namespace baton::io {
namespace {

static_assert(std::endian::native == std::endian::little, "the checkpoint format is little-endian");
constexpr char kMagic[8] = {'B', 'A', 'T', 'O', 'N', 'C', 'K', 'P'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kMaxRank = 64;
constexpr const char* kOptimizerKind = "optimizer.kind";

using Meta = std::vector<std::pair<std::string, std::string>>;

[[noreturn]] void io_fail(const char* op, const std::string& path, const std::string& why) {
  throw IOError(op, str(path, ": ", why), SourceLoc::current());
}

// zlib's crc32 takes a 32-bit length: feed it in pieces.
uint32_t crc_of(const char* data, size_t n) {
  uLong crc = crc32(0, Z_NULL, 0);
  while (n > 0) {
    const uInt piece = uInt(std::min<size_t>(n, size_t(1) << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), piece);
    data += piece;
    n -= piece;
  }
  return uint32_t(crc);
}

template <class T> void put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_string(std::string& out, const std::string& s) {
  put(out, uint32_t(s.size()));
  out += s;
}

std::string serialize(const std::string& path, const nn::NamedTensors& tensors, const Meta& meta) {
  std::set<std::string_view> names;
  for (auto& [name, t] : tensors) {
    if (name.size() > UINT32_MAX) io_fail("save", path, "an entry name is longer than 4 GiB");
    if (!names.insert(name).second)
      throw ValueError("save", str(path, ": duplicate entry '", name, "'"), SourceLoc::current());
    if (!t.defined())
      throw ValueError("save", str(path, ": entry '", name, "' is an undefined tensor"), SourceLoc::current());
    if (t.is_symbolic() || !sym::is_static(t.shape()))
      throw ValueError("save", str(path, ": entry '", name, "' is symbolic and has no data"),
                       SourceLoc::current());
    if (t.dtype() == DType::string)
      throw DTypeError("save", str(path, ": entry '", name, "' is a string tensor; checkpoints hold numbers"),
                       SourceLoc::current());
  }
  std::string out(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, uint64_t(meta.size()));
  for (auto& [key, value] : meta) {
    put_string(out, key);
    put_string(out, value);
  }
  put(out, uint64_t(tensors.size()));
  for (auto& [name, t] : tensors) {
    Tensor c = t.detach().contiguous();
    put_string(out, name);
    put(out, uint8_t(c.dtype()));
    put(out, uint32_t(c.dim()));
    for (int64_t d : c.shape()) put(out, d);
    put(out, uint64_t(c.nbytes()));
    if (c.nbytes() > 0) out.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  put(out, crc_of(out.data(), out.size()));
  return out;
}

// --- reading ---------------------------------------------------------------------------

// Bounds-checked reading of the serialized bytes.
class Reader {
 public:
  Reader(const std::string& bytes, size_t end, const std::string& path)
      : bytes_(bytes), end_(end), path_(path) {}
  template <class T> T get(const std::string& what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
  const char* take(uint64_t n, const std::string& what) {
    if (n > end_ - pos_)
      io_fail("load", path_, str("truncated while reading ", what, " (", n, " bytes at offset ", pos_,
                                 ", ", end_ - pos_, " left)"));
    const char* p = bytes_.data() + pos_;
    pos_ += size_t(n);
    return p;
  }
  std::string get_string(const std::string& what) {
    uint32_t len = get<uint32_t>(what + "'s length");
    return std::string(take(len, what), len);
  }
  size_t left() const { return end_ - pos_; }

 private:
  const std::string& bytes_;
  size_t end_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += str(i ? "," : "", dims[i]);
  return s + "]";
}

Tensor read_entry(Reader& r, const std::string& path, uint64_t index, std::string& name) {
  name = r.get_string(str("the name of entry ", index));
  const std::string what = str("entry '", name, "'");
  auto dtype_code = r.get<uint8_t>(what + "'s dtype");
  if (dtype_code > uint8_t(kLastDType) || DType(dtype_code) == DType::string)  // strings are never saved
    io_fail("load", path, str(what, " has an unknown dtype code ", int(dtype_code)));
  auto dtype = DType(dtype_code);
  uint32_t rank = r.get<uint32_t>(what + "'s rank");
  if (rank > kMaxRank) io_fail("load", path, str(what, " has an implausible rank ", rank));
  std::vector<int64_t> dims;
  for (uint32_t d = 0; d < rank; ++d) dims.push_back(r.get<int64_t>(what + "'s shape"));
  // Every product of dims (elements, and the strides, which skip zero dims) and the byte
  // count must fit: checked, so [2^62, 4] is an error rather than a wrapped-around 0.
  int64_t numel = 1, strides = 1;
  bool overflow = false;
  for (int64_t d : dims) {
    if (d < 0) io_fail("load", path, str(what, " has a negative dim in shape ", dims_text(dims)));
    overflow = overflow || __builtin_mul_overflow(numel, d, &numel) ||
               __builtin_mul_overflow(strides, std::max<int64_t>(d, 1), &strides);
  }
  uint64_t expected = 0;
  overflow = overflow || __builtin_mul_overflow(uint64_t(numel), uint64_t(dtype_size(dtype)), &expected) ||
             expected > uint64_t(INT64_MAX);
  if (overflow)
    io_fail("load", path, str(what, " has shape ", dims_text(dims), " of ", dtype,
                              ", whose element or byte count overflows"));
  auto nbytes = r.get<uint64_t>(what + "'s byte count");
  if (nbytes != expected)
    io_fail("load", path, str(what, " has ", nbytes, " bytes for shape ", dims_text(dims), " of ", dtype,
                              " (", expected, " expected)"));
  const char* data = r.take(nbytes, str(what, "'s data"));
  return from_buffer(data, dtype, Shape(dims));
}

struct Contents {
  nn::NamedTensors tensors;
  Meta meta;
  const std::string* find(const std::string& key) const {
    for (auto& [k, v] : meta)
      if (k == key) return &v;
    return nullptr;
  }
};

// Reads and validates the whole file: magic, CRC, version, every length, name, dtype and
// shape. Throws IOError (or ValueError for a well-formed file with bad names), naming path.
Contents parse(const std::string& path, const std::string& bytes) {
  if (bytes.size() < sizeof kMagic + 4 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    io_fail("load", path, "not a baton checkpoint (bad magic number)");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (stored_crc != crc_of(bytes.data(), bytes.size() - 4))
    io_fail("load", path, "corrupt or truncated (CRC-32 mismatch)");
  Reader r(bytes, bytes.size() - 4, path);
  r.take(sizeof kMagic, "the magic number");
  const auto version = r.get<uint32_t>("the version");
  if (version != 1 && version != 2)
    io_fail("load", path, str("format version ", version, " is not supported (1 and 2 are)"));
  Contents c;
  if (version >= 2) {
    const auto meta_count = r.get<uint64_t>("the metadata count");
    if (meta_count > r.left() / 8) io_fail("load", path, str("implausible metadata count ", meta_count));
    std::set<std::string> keys;
    for (uint64_t i = 0; i < meta_count; ++i) {
      std::string key = r.get_string(str("metadata key ", i));
      std::string value = r.get_string(str("metadata '", key, "'"));
      if (!keys.insert(key).second) io_fail("load", path, str("duplicate metadata '", key, "'"));
      c.meta.emplace_back(std::move(key), std::move(value));
    }
  }
  const auto count = r.get<uint64_t>("the entry count");
  constexpr uint64_t kMinEntry = 4 + 1 + 4 + 8;  // an empty name, rank 0, no data
  if (count > r.left() / kMinEntry) io_fail("load", path, str("implausible entry count ", count));
  std::set<std::string> names;
  for (uint64_t i = 0; i < count; ++i) {
    std::string name;
    Tensor t = read_entry(r, path, i, name);
    if (!names.insert(name).second) io_fail("load", path, str("duplicate entry '", name, "'"));
    c.tensors.emplace_back(std::move(name), std::move(t));
  }
  if (r.left() != 0) io_fail("load", path, str(r.left(), " unexpected bytes after the last entry"));
  return c;
}

// Runs `body`, turning what is not a baton::Error (out of memory, a library's exception)
// into an IOError naming path.
template <class F> auto guarded(const char* op, const std::string& path, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    io_fail(op, path, "out of memory");
  } catch (const std::exception& e) {
    io_fail(op, path, e.what());
  }
}

Contents read_contents(const std::string& path) {
  return guarded("load", path, [&] { return parse(path, detail::read_file(path, "load", "a checkpoint file")); });
}

void save(const std::string& path, const nn::NamedTensors& tensors, const Meta& meta) {
  guarded("save", path, [&] { detail::write_file_atomically(path, serialize(path, tensors, meta), "save"); });
}

}  // namespace

void save_tensors(const std::string& path, const nn::NamedTensors& tensors) { save(path, tensors, {}); }

nn::NamedTensors load_tensors(const std::string& path) { return read_contents(path).tensors; }

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, int64_t epoch) {
  guarded("save", path, [&] {
    nn::NamedTensors all;
    for (auto& [name, t] : model.state_dict()) all.emplace_back("model." + name, t);
    Meta meta;
    if (optimizer) {
      for (auto& [name, t] : optimizer->state_dict()) all.emplace_back("optimizer." + name, t);
      meta.emplace_back(kOptimizerKind, std::string(optimizer->kind()));
    }
    all.emplace_back("meta.epoch", scalar_tensor<int64_t>(epoch));
    save(path, all, meta);
  });
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer) {
  Contents c = read_contents(path);
  return guarded("load", path, [&] {
    auto invalid = [&](const std::string& why) {
      throw ValueError("load_checkpoint", str(path, ": ", why), SourceLoc::current());
    };
    // Sort every entry; a name of no section is an error.
    nn::NamedTensors model_state, optimizer_state;
    const Tensor* epoch = nullptr;
    bool has_optimizer_state = false;
    for (auto& [name, t] : c.tensors) {
      if (name.starts_with("model.")) {
        model_state.emplace_back(name.substr(6), t);
      } else if (name.starts_with("optimizer.")) {
        optimizer_state.emplace_back(name.substr(10), t);
        has_optimizer_state = true;
      } else if (name == "meta.epoch") {
        if (t.dim() != 0 || !is_integral(t.dtype()))
          invalid(str("entry 'meta.epoch' is ", t.dtype(), t.shape(), ", not a 0-d integer"));
        epoch = &t;
      } else {
        invalid(str("unexpected entry '", name, "' (not model., optimizer. or meta.epoch)"));
      }
    }
    for (auto& [key, value] : c.meta)
      if (key != kOptimizerKind) invalid(str("unknown metadata '", key, "'"));
    const std::string* kind = c.find(kOptimizerKind);
    if (kind && !has_optimizer_state) invalid(str("records a ", *kind, " optimizer but no optimizer state"));

    // Validate everything before changing anything.
    model.check_state_dict(model_state);
    if (optimizer) {
      if (!has_optimizer_state && !kind)
        invalid(str("holds no optimizer state to load into ", optimizer->kind()));
      // Files from before the kind was recorded load when their entries are exactly this
      // optimizer's (check_state_dict rejects the buffers of another kind).
      if (kind && *kind != optimizer->kind())
        invalid(str("holds the state of a ", *kind, " optimizer, not of ", optimizer->kind()));
      optimizer->check_state_dict(optimizer_state);
    }
    const int64_t result = epoch ? epoch->item<int64_t>() : 0;

    // Commit. The optimizer first: its load allocates the new state and swaps it in only
    // when complete. The model's copy into validated, same-shaped tensors allocates nothing.
    if (optimizer) optimizer->load_state_dict(optimizer_state);
    model.load_state_dict(model_state);
    return result;
  });
}

}  // namespace baton::io
