// Shared by the fuzz targets: one-time setup, a file in memory for the loaders that take
// a path, and helpers that read every byte of a result (so a tensor whose storage is
// shorter than its shape says shows up under AddressSanitizer).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "baton/baton.h"

namespace baton::fuzz {

// One thread: runs stay deterministic and fast, and OpenMP spawns no pool.
inline void init_once() {
  static const bool done = [] {
    baton::set_num_threads(1);
    // A model may ask for any amount of memory (a convolution padded by 2^29): past this an
    // allocation is an OutOfMemoryError, below libFuzzer's own -rss_limit_mb (fuzz/run.sh).
    baton::set_memory_limit(size_t(1) << 30);
    return true;
  }();
  (void)done;
}

// A memfd reached through /proc/self/fd/N: a real path for ifstream and gzopen, no disk,
// nothing left behind. Every open() of the path starts at offset 0.
class MemFile {
 public:
  explicit MemFile(const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the content with `size` bytes.
  void write(const void* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, data, size, 0) != ssize_t(size)) {
      std::perror("memfd write");
      std::abort();
    }
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Reads every byte of t (a checksum the optimizer cannot drop).
inline uint64_t touch(const Tensor& t) {
  if (!t.defined()) return 0;
  Tensor c = t.detach().contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// BATON_FUZZ_VERBOSE=1 prints what each input did (which error it raised, whether it
// ran): for triage and for checking that seeds reach deep code.
inline bool verbose() {
  static const bool on = std::getenv("BATON_FUZZ_VERBOSE") != nullptr;
  return on;
}
inline void note(const std::string& what) {
  if (verbose()) std::fprintf(stderr, "  %s\n", what.c_str());
}

// A finding that is not a crash by itself (a broken invariant): report and abort, so the
// fuzzer keeps the input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace baton::fuzz
