// Fuzz target: the .npy reader (baton::npy::parse): header dict, dtypes, byte orders,
// Fortran order, sizes.
//
// Expected: baton::Error. Findings: any other exception, a crash or sanitizer report.
#include <exception>
#include <string>

#include "baton/npy.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton::fuzz::init_once();
  try {
    baton::fuzz::touch(baton::npy::parse(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy"));
  } catch (const baton::Error& e) {
    baton::fuzz::note(std::string("baton::Error: ") + e.what());
  } catch (const std::exception& e) {
    baton::fuzz::finding(std::string("an exception that is not a baton::Error: ") + e.what());
  }
  return 0;
}
