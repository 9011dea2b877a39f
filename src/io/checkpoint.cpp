// Format (little-endian): "BATONCKP" | u32 version | u64 count | count entries of
// { u32 name_len | name | u8 dtype | u32 rank | i64 dims[rank] | u64 nbytes | data } |
// u32 CRC-32 of all preceding bytes.
#include "baton/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "baton/ops.h"
#include "baton/optim.h"

namespace baton::io {
namespace {

static_assert(std::endian::native == std::endian::little, "the checkpoint format is little-endian");
constexpr char kMagic[8] = {'B', 'A', 'T', 'O', 'N', 'C', 'K', 'P'};
constexpr uint32_t kVersion = 1;

template <class T> void put(std::string& out, T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

std::string serialize(const nn::NamedTensors& tensors) {
  std::string out(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, uint64_t(tensors.size()));
  for (auto& [name, t] : tensors) {
    Tensor c = t.detach().contiguous();
    put(out, uint32_t(name.size()));
    out += name;
    put(out, uint8_t(c.dtype()));
    put(out, uint32_t(c.dim()));
    for (int64_t d : c.shape()) put(out, d);
    put(out, uint64_t(c.nbytes()));
    out.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  put(out, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(out.data()), uInt(out.size()))));
  return out;
}

[[noreturn]] void io_fail(const char* op, const std::string& path, const std::string& why) {
  throw IOError(op, str(path, ": ", why), SourceLoc::current());
}

// Writes all of `bytes` to fd; false with errno set on failure.
bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = str(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_fail("save", path, str("cannot create ", tmp, " (", std::strerror(errno), ")"));
  bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
  int saved_errno = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved_errno = errno;
    ::unlink(tmp.c_str());
    io_fail("save", path, str("write failed, previous file left intact (", std::strerror(saved_errno), ")"));
  }
  // Make the rename itself durable.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Bounds-checked reading of the serialized bytes.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : bytes_(bytes), path_(path) {}
  template <class T> T get(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
  const char* take(size_t n, const char* what) {
    if (n > bytes_.size() - pos_) io_fail("load", path_, str("truncated while reading ", what));
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

 private:
  const std::string& bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

Tensor read_entry(Reader& r, const std::string& path, std::string& name) {
  uint32_t name_len = r.get<uint32_t>("a name length");
  name.assign(r.take(name_len, "a name"), name_len);
  auto dtype_code = r.get<uint8_t>("a dtype");
  if (dtype_code > uint8_t(DType::f64)) io_fail("load", path, str("'", name, "' has an unknown dtype"));
  auto dtype = DType(dtype_code);
  uint32_t rank = r.get<uint32_t>("a rank");
  if (rank > 64) io_fail("load", path, str("'", name, "' has an implausible rank ", rank));
  Shape shape;
  for (uint32_t d = 0; d < rank; ++d) {
    auto dim = r.get<int64_t>("a dim");
    if (dim < 0) io_fail("load", path, str("'", name, "' has a negative dim"));
    shape.push_back(dim);
  }
  auto nbytes = r.get<uint64_t>("a size");
  if (nbytes != uint64_t(shape.numel()) * dtype_size(dtype))
    io_fail("load", path, str("'", name, "' has ", nbytes, " bytes for shape ", shape));
  return from_buffer(r.take(nbytes, "tensor data"), dtype, shape);
}

nn::NamedTensors with_prefix(const std::string& prefix, const nn::NamedTensors& in) {
  nn::NamedTensors out;
  for (auto& [name, t] : in) out.emplace_back(prefix + name, t);
  return out;
}

nn::NamedTensors strip_prefix(const std::string& prefix, const nn::NamedTensors& in) {
  nn::NamedTensors out;
  for (auto& [name, t] : in)
    if (name.compare(0, prefix.size(), prefix) == 0) out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

}  // namespace

void save_tensors(const std::string& path, const nn::NamedTensors& tensors) {
  write_atomically(path, serialize(tensors));
}

nn::NamedTensors load_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_fail("load", path, str("cannot open (", std::strerror(errno), ")"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof kMagic + 4 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    io_fail("load", path, "not a baton checkpoint (bad magic number)");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (stored_crc != uint32_t(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size() - 4))))
    io_fail("load", path, "corrupt or truncated (CRC-32 mismatch)");
  bytes.resize(bytes.size() - 4);
  Reader r(bytes, path);
  r.take(sizeof kMagic, "the magic number");
  if (auto v = r.get<uint32_t>("the version"); v != kVersion)
    io_fail("load", path, str("format version ", v, " is not supported (expected ", kVersion, ")"));
  auto count = r.get<uint64_t>("the entry count");
  nn::NamedTensors out;
  for (uint64_t i = 0; i < count; ++i) {
    std::string name;
    Tensor t = read_entry(r, path, name);
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
}

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer* optimizer, int64_t epoch) {
  nn::NamedTensors all = with_prefix("model.", model.state_dict());
  if (optimizer)
    for (auto& e : with_prefix("optimizer.", optimizer->state_dict())) all.push_back(e);
  all.emplace_back("meta.epoch", scalar_tensor<int64_t>(epoch));
  save_tensors(path, all);
}

int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer* optimizer) {
  nn::NamedTensors all = load_tensors(path);
  model.load_state_dict(strip_prefix("model.", all));  // validates everything before writing
  if (optimizer) optimizer->load_state_dict(strip_prefix("optimizer.", all));
  for (auto& [name, t] : all)
    if (name == "meta.epoch") return t.item<int64_t>();
  return 0;
}

}  // namespace baton::io
