#include "harness/failing_disk.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "baton/error.h"

namespace baton::testing {

bool write_fails_with_io_error_past_size_limit(const std::function<void()>& write, size_t limit_bytes) {
  pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
    rlimit limit{limit_bytes, limit_bytes};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write();
    } catch (const IOError&) {
      ::_exit(0);  // the expected outcome
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace baton::testing
