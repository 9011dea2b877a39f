// `baton optimize MODEL.onnx -o OUT.onnx [--report] [-O0|-O1|-O2]`: writes the model as
// baton's plan runs it (onnx::SaveOptions::optimized: folded constants as initializers,
// fused steps in the ai.baton domain). --report runs the model once on zeros (symbolic
// dims as 1) and prints what each pass did, the steps and the memory plan; either way the
// written model is loaded back and run once, so a file that baton cannot read is an error.
#include <cstdio>
#include <iostream>
#include <vector>

#include <baton/baton.h>
#include <baton/onnx.h>

#include "cli_parse.h"

namespace {

// Zeros of each input's shape, symbolic dims taken as 1.
std::vector<baton::Tensor> zero_inputs(const baton::onnx::Model& m) {
  std::vector<baton::Tensor> out;
  for (const baton::onnx::ValueInfo& v : m.inputs()) {
    baton::Shape s = v.shape;
    for (int64_t& d : s)
      if (baton::sym::is_symbol(d)) d = 1;
    out.push_back(baton::zeros(s, v.dtype));
  }
  return out;
}

}  // namespace

int optimize_main(const OptimizeOptions& o) {
  baton::onnx::Model m = baton::onnx::load(o.model, {.level = o.level});
  baton::onnx::save(m.graph(), o.output, {.optimized = true, .level = o.level});
  baton::onnx::Model optimized = baton::onnx::load(o.output, {.level = o.level});
  optimized.run(zero_inputs(optimized));
  std::printf("wrote %s\n", o.output.c_str());
  if (!o.report) return 0;
  m.run(zero_inputs(m));
  std::cout << "\nthe passes and the plan (one run on zeros, symbolic dims 1):\n" << m.explain();
  const baton::MemoryPlan plan = m.memory_plan();
  std::printf("memory: arena %.1f MiB, one buffer each %.1f MiB, lower bound %.1f MiB, %zu steps\n",
              double(plan.arena_bytes) / (1 << 20), double(plan.naive_bytes) / (1 << 20),
              double(plan.lower_bound_bytes) / (1 << 20), plan.steps);
  return 0;
}
