// Fuzz target: the ONNX loader (baton::onnx::load_bytes): protobuf parsing, tensor
// conversion, the importers (shape inference at every node), then, for models whose inputs
// are small float tensors (symbolic dims sized 2), one run on ones.
//
// Expected: baton::Error. Findings: any other exception, a crash or sanitizer report.
#include <exception>
#include <string>

#include "baton/onnx.h"
#include "fuzz_util.h"

namespace {

using namespace baton;

// Ones of each input's shape, or nothing when an input is not small and floating.
std::vector<Tensor> small_inputs(const onnx::Model& m) {
  std::vector<Tensor> inputs;
  for (const onnx::ValueInfo& v : m.inputs()) {
    Shape s = v.shape;
    int64_t n = 1;
    for (int64_t& d : s) {
      if (sym::is_symbol(d)) d = 2;
      n *= std::max<int64_t>(d, 1);
      if (n > 4096) return {};
    }
    if (!is_floating(v.dtype)) return {};
    inputs.push_back(ones(s, v.dtype));
  }
  return inputs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  baton::fuzz::init_once();
  try {
    onnx::Model m = onnx::load_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
    std::vector<Tensor> inputs = small_inputs(m);
    if (inputs.size() == m.inputs().size())
      for (const Tensor& out : m.run(inputs)) baton::fuzz::touch(out);
  } catch (const baton::Error& e) {
    baton::fuzz::note(std::string("baton::Error: ") + e.what());
  } catch (const std::exception& e) {
    baton::fuzz::finding(std::string("an exception that is not a baton::Error: ") + e.what());
  }
  return 0;
}
