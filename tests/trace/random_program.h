// Seeded random programs over the public ops, for the tests that run one program in every
// mode (eager, static graph, compile()) and compare (tests/trace/random_programs_test.cpp).
//
// A program is a small DAG of steps. Each step is a C++ closure that calls public ops on
// the values before it, so the same program runs on concrete tensors (eager) and on
// symbolic ones (graph building, compile() tracing). Inputs have a leading batch dim; the
// generator tracks every value's shape with the batch factor kept apart, and a bound on
// its values, so each step it picks is valid for any batch size >= 2 and stays in a safe
// numeric range (no log of negatives, no division by ~0, no overflow).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <baton/baton.h>

namespace baton::testing {

// A dim of a generated value: `size`, or `size` times the batch size when `batch`.
struct Dim {
  int64_t size = 1;
  bool batch = false;
  friend bool operator==(const Dim&, const Dim&) = default;
};
using DimList = std::vector<Dim>;

// "[batch,3,2*batch]"
std::string dims_text(const DimList& dims);
// The concrete shape for one batch size.
Shape concrete_shape(const DimList& dims, int64_t batch);

struct Step {
  std::string text;  // "v4 = reshape(v2, [v1.size(0),-1])"
  std::function<Tensor(const std::vector<Tensor>& values)> run;
};

struct RandomProgram {
  uint64_t seed = 0;
  std::vector<DimList> inputs;       // values 0..inputs.size()-1
  std::vector<DType> input_dtypes;
  std::vector<double> input_lo, input_hi;  // the range input data is drawn from
  std::vector<Step> steps;           // value inputs.size() + i is steps[i]'s result
  std::vector<int> outputs;          // value ids
  std::vector<DimList> output_dims;
  std::vector<DType> output_dtypes;
  bool uses_f32 = false;             // some value is f32 (sets the comparison tolerance)

  // Runs the steps on the inputs (concrete or symbolic); returns the outputs.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  // Deterministic input data, and the output cotangents of the gradient check, for one
  // batch size.
  std::vector<Tensor> make_inputs(int64_t batch) const;
  std::vector<Tensor> make_cotangents(int64_t batch) const;
  // A readable listing: inputs, one line per step with its shape, outputs.
  std::string text() const;
};

RandomProgram generate_program(uint64_t seed);

}  // namespace baton::testing
