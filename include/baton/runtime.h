// Process-wide settings.
#pragma once

namespace baton {

// Threads for intra-op parallelism (OpenMP, shared with oneDNN). Default: the cores.
// n must be in [1, 1024]; anything else is a ValueError. Threads start lazily, at the
// first op that runs (or here), never when the library loads.
void set_num_threads(int n);
int get_num_threads();

// fork(): a child forked before baton ran its first op has a full pool of its own. A
// child forked later runs single-threaded (OpenMP's pool cannot be restarted after fork;
// PyTorch's forked workers do the same), and set_num_threads(n > 1) there is a RuntimeError.
bool is_single_threaded_fork();

}  // namespace baton
