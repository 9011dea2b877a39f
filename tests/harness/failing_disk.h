// A write that fails midway, in miniature: the file-size limit of a child process.
#pragma once
#include <cstddef>
#include <functional>

namespace baton::testing {

// Runs write() in a forked child whose files may not grow past limit_bytes; true when the
// write threw baton::IOError there, as a write must when the disk fills up. The caller
// then checks that the previous file is intact and no temporary file is left.
bool write_fails_with_io_error_past_size_limit(const std::function<void()>& write, size_t limit_bytes = 4096);

}  // namespace baton::testing
