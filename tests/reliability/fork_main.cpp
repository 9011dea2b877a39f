// fork(): the library starts no thread when it loads; a child forked before the first op
// has a full pool of its own; a child forked after parallel work runs single-threaded and
// gives the same results. A hung child is killed by an alarm, so a regression fails
// instead of hanging. Run by ctest as reliability.fork.
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <string>

#include <baton/baton.h>

using namespace baton;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok    " : "FAIL  ") << what << std::endl;
  if (!ok) ++failures;
}

int os_threads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// Element-wise work big enough to go parallel, and a oneDNN convolution.
bool work_gives_right_answers() {
  Tensor x = ones({1 << 20});
  const bool sum_ok = ((x * 2.0f + 1.0f).sum().item<float>() == 3.0f * (1 << 20));
  Tensor y = conv2d(ones({2, 3, 16, 16}), ones({4, 3, 3, 3}));
  const bool conv_ok = y.shape() == Shape{2, 4, 14, 14} && max(y).item<float>() == 27.0f &&
                       min(y).item<float>() == 27.0f;
  return sum_ok && conv_ok;
}

// Runs body in a forked child (killed after 60 s) and says whether it exited 0.
bool in_child(const std::function<bool()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    bool ok = false;
    try {
      ok = body();
    } catch (const std::exception& e) {
      std::cout << "child: " << e.what() << std::endl;
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) std::cout << "child killed by signal " << WTERMSIG(status) << std::endl;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main() {
  check(os_threads() == 1, "no thread is started when the library loads");

  check(in_child([] {
          set_num_threads(2);
          return !is_single_threaded_fork() && work_gives_right_answers() && os_threads() >= 2;
        }),
        "a child forked before the first op runs with a pool of its own");

  set_num_threads(2);
  check(work_gives_right_answers() && os_threads() >= 2, "the parent runs on 2 threads");

  check(in_child([] {
          if (!is_single_threaded_fork() || get_num_threads() != 1) return false;
          if (!work_gives_right_answers()) return false;
          try {
            set_num_threads(2);
            return false;
          } catch (const RuntimeError&) {
          }
          set_num_threads(1);  // asking for what it has is fine
          return work_gives_right_answers();
        }),
        "a child forked after parallel work runs single-threaded, with the same results");

  check(work_gives_right_answers(), "the parent still runs after its children");
  std::cout << (failures ? 0 : 4) << " passed, " << failures << " failed" << std::endl;
  return failures ? 1 : 0;
}
