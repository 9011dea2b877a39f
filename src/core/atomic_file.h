// Reading a whole file, and writing a file so that readers see the old contents or the new, never a part: the bytes
// go to a temporary file in the target's folder, are fsync'ed, and the temporary file is
// renamed over the target (then the folder is fsync'ed). Checkpoints (io/) and profiler
// traces (runtime/) share it, hence its place in core/.
#pragma once
#include <string>
#include <string_view>

namespace baton::detail {

// Replaces `path` with `bytes`. On failure throws IOError "[op] path: why" and leaves the
// previous file (if any) as it was and no temporary file behind. Also removes temporary
// files that killed writers of the same target left behind.
void write_file_atomically(const std::string& path, std::string_view bytes, const char* op);

// The whole of `path` (a regular file; a FIFO or device is refused without blocking). On
// failure throws IOError "[op] path: why"; `kind` names what was expected ("a checkpoint
// file") when the path is a directory.
std::string read_file(const std::string& path, const char* op, const char* kind);

}  // namespace baton::detail
