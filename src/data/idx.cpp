// The IDX format (MNIST, Fashion-MNIST): 2 zero bytes, a type byte, a rank byte, one
// big-endian u32 per dim, then big-endian data. zlib reads plain and gzip files alike.
//
// The header is not trusted: the dims' product is overflow-checked, and the data is read
// in chunks of 1 MiB as the stream yields it, so that a header promising more than the
// stream holds is reported as truncated without allocating what it promises. The output
// tensor is allocated once the data has all been read.
#include "data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "baton/data.h"

namespace baton::data {
namespace {

constexpr int kMaxRank = 8;
constexpr size_t kChunk = size_t(1) << 20;  // a multiple of every element size
// Beyond any real data set; keeps every size below in range of int64_t and size_t.
constexpr uint64_t kMaxBytes = uint64_t(1) << 40;

[[noreturn]] void fail(const std::string& name, const std::string& why) {
  throw IOError("read_idx", str(name, ": ", why), SourceLoc::current());
}

// A stream of uncompressed bytes. read() returns how many it wrote into dst (0: the end)
// and throws IOError when the data is corrupt.
class Source {
 public:
  virtual ~Source() = default;
  virtual size_t read(void* dst, size_t n) = 0;
};

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// A file, plain or gzip, through zlib's gz* functions.
class FileSource : public Source {
 public:
  FileSource(const std::string& path) : path_(path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(path, "cannot open (it is a folder)");
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) fail(path, str("cannot open (", errno ? std::strerror(errno) : "out of memory", ")"));
  }
  size_t read(void* dst, size_t n) override {
    const int got = gzread(file_.get(), dst, unsigned(std::min<size_t>(n, 1u << 30)));
    if (got < 0) {
      int err = 0;
      const char* message = gzerror(file_.get(), &err);
      fail(path_, str("corrupt compressed data (", message ? message : "unknown zlib error", ")"));
    }
    return size_t(got);
  }

 private:
  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

// Bytes in memory: gzip (one member or several, as gzread reads them) or plain.
class MemorySource : public Source {
 public:
  MemorySource(const void* data, size_t size, const std::string& name)
      : in_(static_cast<const unsigned char*>(data)), left_(size), name_(name) {
    gzip_ = left_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
    if (!gzip_) return;
    std::memset(&z_, 0, sizeof z_);
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail(name_, "cannot start zlib");
    open_ = true;
  }
  ~MemorySource() override {
    if (open_) inflateEnd(&z_);
  }
  size_t read(void* dst, size_t n) override {
    if (!gzip_) {
      const size_t k = std::min(n, left_);
      if (k) std::memcpy(dst, in_, k);
      in_ += k;
      left_ -= k;
      return k;
    }
    n = std::min<size_t>(n, 1u << 30);
    size_t done = 0;
    while (done < n && !finished_) {
      z_.next_in = const_cast<unsigned char*>(in_);
      z_.avail_in = uInt(std::min<size_t>(left_, 1u << 30));
      z_.next_out = static_cast<unsigned char*>(dst) + done;
      z_.avail_out = uInt(n - done);
      const uInt in_before = z_.avail_in, out_before = z_.avail_out;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      in_ += in_before - z_.avail_in;
      left_ -= in_before - z_.avail_in;
      done += out_before - z_.avail_out;
      if (rc == Z_STREAM_END) {
        // Another member follows, or the end (trailing bytes that are not gzip: ignored).
        if (left_ >= 2 && in_[0] == 0x1f && in_[1] == 0x8b) inflateReset(&z_);
        else finished_ = true;
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        // Output space left over and no input left: the stream stops mid-member.
        if (left_ == 0 && z_.avail_out > 0) fail(name_, "corrupt compressed data (unexpected end of file)");
        if (rc == Z_BUF_ERROR) fail(name_, "corrupt compressed data (zlib made no progress)");
      } else {
        fail(name_, str("corrupt compressed data (", z_.msg ? z_.msg : "zlib error", ")"));
      }
    }
    return done;
  }

 private:
  const unsigned char* in_;
  size_t left_;
  std::string name_;
  bool gzip_ = false, open_ = false, finished_ = false;
  z_stream z_;
};

void read_exact(Source& src, void* dst, size_t n, const std::string& name, const char* what) {
  size_t done = 0;
  while (done < n) {
    const size_t got = src.read(static_cast<char*>(dst) + done, n - done);
    if (got == 0) fail(name, str("truncated: ", what, " needs ", n, " bytes, found ", done));
    done += got;
  }
}

uint32_t big_endian_u32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

struct ElementType {
  size_t size;
  DType dtype;
};

ElementType element_type(unsigned char code, const std::string& name) {
  switch (code) {
    case 0x08: return {1, i32};  // unsigned byte
    case 0x09: return {1, i32};  // signed byte
    case 0x0B: return {2, i32};  // short
    case 0x0C: return {4, i32};  // int
    case 0x0D: return {4, f32};  // float
    case 0x0E: return {8, f64};  // double
    default: break;
  }
  static const char* hex = "0123456789abcdef";
  fail(name, str("unknown IDX element type 0x", hex[code >> 4], hex[code & 15],
                 " (expected 0x08, 0x09, 0x0b, 0x0c, 0x0d or 0x0e)"));
}

// Converts n big-endian elements of `code` into out (i32/f32/f64 per element_type),
// starting at element `at`.
void convert(const unsigned char* raw, unsigned char code, int64_t n, const Tensor& out, int64_t at) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = at + i;
    switch (code) {
      case 0x08: out.data<int32_t>()[o] = raw[i]; break;
      case 0x09: out.data<int32_t>()[o] = int8_t(raw[i]); break;
      case 0x0B: out.data<int32_t>()[o] = int16_t(raw[2 * i] << 8 | raw[2 * i + 1]); break;
      case 0x0C: out.data<int32_t>()[o] = int32_t(big_endian_u32(raw + 4 * i)); break;
      case 0x0D: {
        uint32_t bits = big_endian_u32(raw + 4 * i);
        std::memcpy(&out.data<float>()[o], &bits, 4);
        break;
      }
      case 0x0E: {
        uint64_t bits = uint64_t(big_endian_u32(raw + 8 * i)) << 32 | big_endian_u32(raw + 8 * i + 4);
        std::memcpy(&out.data<double>()[o], &bits, 8);
        break;
      }
    }
  }
}

Tensor parse_idx(Source& src, const std::string& name) {
  unsigned char header[4];
  read_exact(src, header, 4, name, "the header");
  if (header[0] != 0 || header[1] != 0) fail(name, "not an IDX file (bad magic number)");
  const ElementType type = element_type(header[2], name);
  const int rank = header[3];
  if (rank < 1 || rank > kMaxRank) fail(name, str("not an IDX file: rank ", rank, " (expected 1 to ", kMaxRank, ")"));
  // Overflow-checked. Zero dims count as 1 here: the strides of an empty tensor are still
  // products of the other dims, and must fit too.
  std::vector<int64_t> dims;
  uint64_t numel = 1, strides = 1, bytes = 0;
  bool too_big = false;
  for (int d = 0; d < rank; ++d) {
    unsigned char dim[4];
    read_exact(src, dim, 4, name, "the dims");
    const uint32_t size = big_endian_u32(dim);
    dims.push_back(int64_t(size));
    numel *= size;  // exact whenever too_big stays false
    too_big |= __builtin_mul_overflow(strides, uint64_t(std::max<uint32_t>(size, 1)), &strides);
  }
  if (too_big || __builtin_mul_overflow(strides, uint64_t(type.size), &bytes) || bytes > kMaxBytes) {
    std::string text;
    for (int64_t d : dims) text += (text.empty() ? "" : ",") + std::to_string(d);
    fail(name, str("implausible shape [", text, "]: more than ", kMaxBytes, " bytes of data"));
  }
  bytes = numel * type.size;
  const Shape shape(dims);

  // The data, in chunks as the stream yields it: never more than what is there + 1 chunk.
  std::vector<std::unique_ptr<unsigned char[]>> chunks;
  uint64_t done = 0;
  while (done < bytes) {
    const size_t want = size_t(std::min<uint64_t>(bytes - done, kChunk));
    chunks.emplace_back(new unsigned char[want]);
    size_t got = 0;
    while (got < want) {
      const size_t k = src.read(chunks.back().get() + got, want - got);
      if (k == 0)
        fail(name, str("truncated: the data of shape ", shape, " needs ", bytes, " bytes, found ", done + got));
      got += k;
    }
    done += want;
  }
  unsigned char extra;
  if (src.read(&extra, 1) != 0) fail(name, str("trailing bytes after the ", bytes, " bytes of data"));

  Tensor out = empty(shape, type.dtype);
  int64_t at = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const uint64_t chunk_bytes = std::min<uint64_t>(bytes - uint64_t(c) * kChunk, kChunk);
    const int64_t n = int64_t(chunk_bytes / type.size);
    convert(chunks[c].get(), header[2], n, out, at);
    at += n;
    chunks[c].reset();  // free as we go
  }
  return out;
}

}  // namespace

Tensor read_idx(const std::string& path) {
  FileSource file(path);
  return parse_idx(file, path);
}

Tensor read_idx_bytes(const void* data, size_t size, const std::string& name) {
  MemorySource memory(data, size, name);
  return parse_idx(memory, name);
}

}  // namespace baton::data
