// NumPy .npy files: one tensor per file, readable and writable by numpy.load / numpy.save.
//
//   npy::save("weights.npy", w);            // np.load("weights.npy") in Python
//   Tensor x = npy::load("features.npy");   // from np.save("features.npy", a)
//
// Reading accepts format versions 1.0, 2.0 and 3.0, the dtypes baton has ('|b1' bool,
// 'i4', 'i8', 'f4', 'f8'; little- or big-endian, big-endian data is byte-swapped) and
// Fortran-order arrays (returned as ordinary row-major tensors). Another valid NumPy dtype
// ('|u1', '<f2', '<c8', '|O', ...) is a DTypeError naming it. Every other fault (not a
// .npy file, a truncated or malformed header, a negative or overflowing shape, data bytes
// that are not exactly numel * itemsize) is an IOError naming the file (`what` for
// parse()) and the problem; the header is validated against the real size before anything
// is allocated for the data, so hostile bytes never crash, hang or allocate unboundedly.
//
// Writing produces version 1.0 (2.0 when the header would not fit), little-endian, C order,
// the data of t.contiguous(). save() is atomic like io::save_tensors: the target is the
// previous file or the complete new one, never a part, and a failed save (unwritable
// folder, full disk) is an IOError that leaves no temporary file. A symbolic tensor (a value
// of a graph being built) has no data: ValueError.
#pragma once
#include <string>
#include <string_view>

#include "baton/tensor.h"

namespace baton::npy {

Tensor load(const std::string& path, SourceLoc loc = SourceLoc::current());
// The tensor in the bytes of a .npy file; `what` names them in error messages.
Tensor parse(std::string_view bytes, const std::string& what, SourceLoc loc = SourceLoc::current());

void save(const std::string& path, const Tensor& t, SourceLoc loc = SourceLoc::current());
// The bytes save() writes.
std::string to_bytes(const Tensor& t);

}  // namespace baton::npy
