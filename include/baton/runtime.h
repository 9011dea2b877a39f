// Process-wide settings.
#pragma once

namespace baton {

// Threads for intra-op parallelism (OpenMP, shared with oneDNN). Default: the cores.
void set_num_threads(int n);
int get_num_threads();

}  // namespace baton
