// The IDX reader on bytes in memory, beside read_idx (baton/data.h) on a file: for tests
// and fuzzers (include it with src/ on the include path; libbaton exports it).
#pragma once
#include <cstddef>
#include <string>

#include "baton/tensor.h"

namespace baton::data {

// Reads IDX data held in memory, plain or gzip-compressed, exactly as read_idx reads a
// file. Bad data (a bad header, an unknown element type, dims whose product overflows,
// fewer or more bytes than the header promises, corrupt compression) is an IOError
// naming `name`; nothing larger than the bytes actually present is allocated for it.
Tensor read_idx_bytes(const void* data, size_t size, const std::string& name = "<memory>");

}  // namespace baton::data
