// ONNX models: load one into a static graph and run it, with no code of the program that
// trained it (docs/onnx.md).
//
//   auto m = baton::onnx::load("resnet18.onnx");        // checked, optimized when first run
//   std::vector<Tensor> out = m.run({x});               // inputs in the model's order
//   Tensor y = m.run({{"input", x}}).at(0);             // or by name
//   std::cout << m.info();                              // inputs, outputs, opset, op counts
//
// The model becomes a baton Graph: initializers become constants, If and Loop become
// control-flow nodes with subgraphs, dims the model names (dim_param "batch") stay
// symbolic and unnamed unknown dims get fresh symbols. It then runs through the same
// passes and plans as any static graph. A malformed or hostile file is a baton::Error
// naming the node and the problem.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/graph.h"

namespace baton::onnx {

struct LoadOptions {
  OptLevel level = OptLevel::O2;
  size_t inter_op_threads = 1;  // as SessionOptions::inter_op_threads
  int intra_op_threads = 0;     // as SessionOptions::intra_op_threads
  // Shapes that replace what the model declares for these inputs, e.g. {"input", {"batch",
  // 3, 224, 224}} to run a model exported for one image on any batch. The rank must match.
  std::vector<std::pair<std::string, std::vector<SymDim>>> input_shapes = {};
};

// A model input or output of any ONNX type: a tensor, a sequence of tensors, or an empty
// optional (an optional that holds something is that tensor or sequence).
class Value {
 public:
  enum class Kind : uint8_t { tensor, sequence, none };
  Value() = default;  // an empty optional
  Value(Tensor t) : kind_(Kind::tensor), tensor_(std::move(t)) {}  // NOLINT: a tensor is a value
  static Value sequence(std::vector<Tensor> items);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::tensor; }
  const Tensor& tensor() const;              // ValueError unless a tensor
  const std::vector<Tensor>& items() const;  // ValueError unless a sequence
  // "f32[2,3]", "sequence of 2: f32[2], f32[3]", "none": how messages show it.
  std::string describe() const;

 private:
  Kind kind_ = Kind::none;
  Tensor tensor_;
  std::vector<Tensor> items_;
};

// One input or output as the model declares it: its name, dtype and shape (symbols for
// dims the model leaves open); for a sequence, of its items.
struct ValueInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  bool sequence = false;  // a sequence of such tensors
  bool optional = false;  // an optional: may also be given Value() (none)
  bool any_shape = false;  // the model declares no shape: any rank fits (a sequence's items)
  // Whether t may be fed here: the same dtype and rank, and every size the model fixes
  // (a symbolic dim takes any size).
  bool accepts(const Tensor& t) const;
  bool accepts(const Value& v) const;
  // "f32[N,3]", "sequence of f32[?]", "optional f32[2]".
  std::string describe() const;
};

class Model {
 public:
  // Inputs in the order of inputs(); a wrong count, dtype or shape is an error naming the
  // input.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, SourceLoc loc = SourceLoc::current());
  std::vector<Tensor> run(const std::vector<std::pair<std::string, Tensor>>& named_inputs,
                          SourceLoc loc = SourceLoc::current());
  // Any model, sequences and optionals included. A model with sequence or optional inputs
  // imports once per distinct value of them (the sequence ops unroll over the items; at
  // most 8 imports kept).
  std::vector<Value> run_values(const std::vector<Value>& inputs, SourceLoc loc = SourceLoc::current());

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  int64_t opset() const;  // of the default domain
  // The imported graph (before optimization); Graph::optimized() gives what runs.
  const Graph& graph() const;
  // Inputs, outputs, opset, producer, node counts by op type, parameters and their bytes.
  std::string info() const;
  // The plan of the last run (Session::explain()).
  std::string explain() const;
  MemoryPlan memory_plan() const;

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  friend Model load(const std::string& path, LoadOptions options, SourceLoc loc);
  friend Model load_bytes(std::string_view bytes, const std::string& name, LoadOptions options, SourceLoc loc);
  std::unique_ptr<Impl> impl_;
};

// Reads and imports a model file. Throws IOError for an unreadable or corrupt file and
// GraphError (naming the node) for one baton cannot run.
Model load(const std::string& path, LoadOptions options = {}, SourceLoc loc = SourceLoc::current());
// The same from the bytes of a model; `name` names it in messages.
Model load_bytes(std::string_view bytes, const std::string& name, LoadOptions options = {},
                 SourceLoc loc = SourceLoc::current());

struct SaveOptions {
  // Write the graph as a plan at `level` runs it: folded constants as initializers, and
  // fused steps (conv2d_fused, fused_elementwise, ...) as ops of the domain "ai.baton",
  // which baton reads back and other runtimes do not. Captured tensors are read as frozen
  // (the file holds their values now) and inputs nothing reads are left out. Off: standard
  // ONNX only.
  bool optimized = false;
  OptLevel level = OptLevel::O2;
};

// Writes a graph (its declared outputs; see Graph::set_outputs) as an ONNX model (opset
// 17): placeholders become inputs (symbolic dims as named dims), constants and variables
// initializers. Throws GraphError naming a node that has no ONNX form; the file is written
// atomically, never half.
void save(const Graph& graph, const std::string& path, SaveOptions options = {},
          SourceLoc loc = SourceLoc::current());
std::string save_bytes(const Graph& graph, SaveOptions options = {}, SourceLoc loc = SourceLoc::current());

// Reads a TensorProto file (the test_data_set_*/input_*.pb of the ONNX test suites).
Tensor load_tensor(const std::string& path, SourceLoc loc = SourceLoc::current());

// --- the ONNX backend tests' layout: DIR/model.onnx, DIR/test_data_set_N/{input,output}_K.pb

struct TestDataSet {
  std::vector<Value> inputs, outputs;
};
// input_0.pb, input_1.pb, ... and output_0.pb, ... of one test_data_set_N folder (each
// list up to the first missing number), read as TensorProtos.
TestDataSet load_test_data_set(const std::string& dir, SourceLoc loc = SourceLoc::current());
// The same, each file read as the type the model declares for that input or output
// (SequenceProto, OptionalProto or TensorProto).
TestDataSet load_test_data_set(const std::string& dir, const Model& model, SourceLoc loc = SourceLoc::current());

// How an output is judged against a reference, as ONNX's backend runner does: floats
// within atol + rtol * |expected| (or, with of_scale > 0, the largest error within of_scale
// times the reference's largest magnitude, as whole models are judged), NaN equal to NaN,
// integers and bools exact, dtypes and shapes equal.
struct Tolerance {
  double rtol = 1e-3, atol = 1e-7;
  double of_scale = 0;
};
struct Comparison {
  double max_abs_err = 0;  // the largest |got - expected| (0 when dtypes or shapes differ)
  int64_t mismatched = 0;  // elements beyond the tolerance
  std::string problem;     // empty when the output passes, else what is wrong
  bool ok() const { return problem.empty(); }
};
Comparison compare(const Tensor& got, const Tensor& expected, const Tolerance& tolerance = {});
// Sequences item by item (the same length), none equal to none.
Comparison compare(const Value& got, const Value& expected, const Tolerance& tolerance = {});

}  // namespace baton::onnx
