// The file reading and atomic writing of core/atomic_file.h (moved here from io/checkpoint.cpp).
#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "baton/error.h"

namespace baton::detail {
namespace {

[[noreturn]] void io_fail(const char* op, const std::string& path, const std::string& why) {
  throw IOError(op, str(path, ": ", why), SourceLoc::current());
}

// Writes all of `bytes` to fd; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, std::min<size_t>(bytes.size() - done, size_t(1) << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

struct Target {
  std::string dir;   // "." or the folder, without a trailing slash unless it is "/"
  std::string base;  // the file name
};

Target split_path(const std::string& path, const char* op) {
  const size_t slash = path.rfind('/');
  Target t;
  if (slash == std::string::npos) {
    t.dir = ".";
    t.base = path;
  } else {
    t.dir = slash == 0 ? "/" : path.substr(0, slash);
    t.base = path.substr(slash + 1);
  }
  if (t.base.empty() || t.base == "." || t.base == "..") io_fail(op, path, "is not a file path");
  return t;
}

std::string join(const Target& t, const std::string& name) {
  return t.dir == "/" ? "/" + name : t.dir + "/" + name;
}

// A temporary name no other save uses: "<base>.tmp.<pid>.<tid>.<counter>".
std::string temp_name(const Target& t) {
  static std::atomic<uint64_t> counter{0};
  return join(t, str(t.base, ".tmp.", ::getpid(), ".", long(::syscall(SYS_gettid)), ".",
                     counter.fetch_add(1, std::memory_order_relaxed)));
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Removes "<base>.tmp.<pid>[.<tid>.<counter>]" files of processes that no longer exist: the
// leftovers of saves that were killed between naming their temporary file and renaming it
// (or, without O_TMPFILE, while writing it). Best effort: errors are ignored.
void remove_stale_temp_files(const Target& t) {
  DIR* d = ::opendir(t.dir.c_str());
  if (!d) return;
  const std::string prefix = t.base + ".tmp.";
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string_view rest = name.substr(prefix.size());
    const size_t dot = rest.find('.');
    std::string_view pid_text = rest.substr(0, dot);
    if (!all_digits(pid_text)) continue;
    if (dot != std::string_view::npos) {  // ".<tid>.<counter>"
      std::string_view tail = rest.substr(dot + 1);
      const size_t dot2 = tail.find('.');
      if (dot2 == std::string_view::npos || !all_digits(tail.substr(0, dot2)) ||
          !all_digits(tail.substr(dot2 + 1)))
        continue;
    }
    pid_t pid = 0;
    auto [end, err] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    if (err != std::errc() || pid <= 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

// Writes `bytes` to a new file at `tmp` (named from the start); returns false with errno.
bool write_named(const std::string& tmp, std::string_view bytes, bool& created) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  created = true;
  bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
  int saved = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok && saved) errno = saved;
  return ok;
}

// Writes `bytes` to an unnamed file in the target's folder (O_TMPFILE) and then gives it
// the name `tmp`. Returns 1 on success, 0 when O_TMPFILE or naming it is not available
// (nothing is left behind then), -1 on a write error with errno set.
int write_anonymous(const Target& t, const std::string& tmp, std::string_view bytes) {
#ifdef O_TMPFILE
  int fd = ::open(t.dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return 0;
  if (!write_all(fd, bytes) || ::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  const std::string proc = str("/proc/self/fd/", fd);
  bool linked = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) == 0 ||
                ::linkat(fd, "", AT_FDCWD, tmp.c_str(), AT_EMPTY_PATH) == 0;
  int saved = errno;
  if (::close(fd) != 0 && linked) {
    saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    return -1;
  }
  errno = saved;
  return linked ? 1 : 0;
#else
  (void)t, (void)tmp, (void)bytes;
  return 0;
#endif
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes, const char* op) {
  const Target target = split_path(path, op);
  remove_stale_temp_files(target);
  const std::string tmp = temp_name(target);
  int written = write_anonymous(target, tmp, bytes);
  bool created = written != 0;
  if (written == 0) {
    errno = 0;
    bool ok = write_named(tmp, bytes, created);
    if (!ok && !created) io_fail(op, path, str("cannot create ", tmp, " (", std::strerror(errno), ")"));
    written = ok ? 1 : -1;
  }
  if (written < 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    io_fail(op, path, str("write failed, previous file left intact (", std::strerror(saved), ")"));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    io_fail(op, path, str("cannot rename ", tmp, " over it, previous file left intact (",
                          std::strerror(saved), ")"));
  }
  // Make the rename itself durable.
  if (int dfd = ::open(target.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path, const char* op, const char* kind) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  if (fd < 0) io_fail(op, path, str("cannot open (", std::strerror(errno), ")"));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) io_fail(op, path, str("cannot stat (", std::strerror(errno), ")"));
  if (S_ISDIR(st.st_mode)) io_fail(op, path, str("is a directory, not ", kind));
  if (!S_ISREG(st.st_mode)) io_fail(op, path, "is not a regular file");
  std::string bytes;
  bytes.resize(size_t(st.st_size));
  size_t done = 0;
  for (;;) {
    if (done == bytes.size()) bytes.resize(bytes.size() + 65536);  // the file grew
    ssize_t n = ::read(fd, bytes.data() + done, std::min<size_t>(bytes.size() - done, size_t(1) << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail(op, path, str("read failed (", std::strerror(errno), ")"));
    if (n == 0) break;
    done += size_t(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace baton::detail
