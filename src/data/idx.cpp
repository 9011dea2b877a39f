// The IDX format (MNIST, Fashion-MNIST): 2 zero bytes, a type byte, a rank byte, one
// big-endian u32 per dim, then big-endian data. zlib reads plain and gzip files alike.
#include <zlib.h>

#include <cstring>
#include <memory>

#include "baton/data.h"

namespace baton::data {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw IOError("read_idx", str(path, ": ", why), SourceLoc::current());
}

void read_exact(gzFile f, void* dst, size_t n, const std::string& path, const char* what) {
  size_t done = 0;
  while (done < n) {
    unsigned chunk = unsigned(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(f, static_cast<char*>(dst) + done, chunk);
    if (got < 0) {
      int err;
      fail(path, str("corrupt compressed data (", gzerror(f, &err), ")"));
    }
    if (got == 0) fail(path, str("truncated: ", what, " needs ", n, " bytes, found ", done));
    done += size_t(got);
  }
}

uint32_t big_endian_u32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

struct ElementType {
  size_t size;
  DType dtype;
};

ElementType element_type(unsigned char code, const std::string& path) {
  switch (code) {
    case 0x08: return {1, i32};  // unsigned byte
    case 0x09: return {1, i32};  // signed byte
    case 0x0B: return {2, i32};  // short
    case 0x0C: return {4, i32};  // int
    case 0x0D: return {4, f32};  // float
    case 0x0E: return {8, f64};  // double
    default: fail(path, str("unknown IDX element type 0x", std::hex, int(code)));
  }
}

// Converts n big-endian elements of `code` into out (i32/f32/f64 per element_type).
void convert(const unsigned char* raw, unsigned char code, int64_t n, const Tensor& out) {
  for (int64_t i = 0; i < n; ++i) {
    switch (code) {
      case 0x08: out.data<int32_t>()[i] = raw[i]; break;
      case 0x09: out.data<int32_t>()[i] = int8_t(raw[i]); break;
      case 0x0B: out.data<int32_t>()[i] = int16_t(raw[2 * i] << 8 | raw[2 * i + 1]); break;
      case 0x0C: out.data<int32_t>()[i] = int32_t(big_endian_u32(raw + 4 * i)); break;
      case 0x0D: {
        uint32_t bits = big_endian_u32(raw + 4 * i);
        std::memcpy(&out.data<float>()[i], &bits, 4);
        break;
      }
      case 0x0E: {
        uint64_t bits = uint64_t(big_endian_u32(raw + 8 * i)) << 32 | big_endian_u32(raw + 8 * i + 4);
        std::memcpy(&out.data<double>()[i], &bits, 8);
        break;
      }
    }
  }
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) fail(path, str("cannot open (", std::strerror(errno), ")"));
  unsigned char header[4];
  read_exact(f.get(), header, 4, path, "the header");
  if (header[0] != 0 || header[1] != 0 || header[3] == 0 || header[3] > 8)
    fail(path, "not an IDX file (bad magic number)");
  ElementType type = element_type(header[2], path);
  Shape shape;
  for (int d = 0; d < header[3]; ++d) {
    unsigned char dim[4];
    read_exact(f.get(), dim, 4, path, "the dims");
    shape.push_back(int64_t(big_endian_u32(dim)));
  }
  const int64_t n = shape.numel();
  if (n > (int64_t(1) << 34)) fail(path, str("implausible shape ", shape));
  std::vector<unsigned char> raw(size_t(n) * type.size);
  read_exact(f.get(), raw.data(), raw.size(), path, "the data");
  unsigned char extra;
  if (gzread(f.get(), &extra, 1) != 0) fail(path, "trailing bytes after the data");
  Tensor out = empty(shape, type.dtype);
  convert(raw.data(), header[2], n, out);
  return out;
}

}  // namespace baton::data
