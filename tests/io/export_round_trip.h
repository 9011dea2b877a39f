// Round trips of graphs through ONNX export for the export tests: save (plain and
// optimized), ONNX's checker, load, and the same outputs as the graph gives.
#pragma once
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <algorithm>

#include "baton/baton.h"
#include "baton/onnx.h"

namespace baton {

// The ONNX op types of a model's main graph.
inline std::vector<std::string> op_types(const std::string& bytes) {
  ::onnx::ModelProto proto;
  EXPECT_TRUE(proto.ParseFromString(bytes));
  EXPECT_NO_THROW(::onnx::checker::check_model(proto)) << "the ONNX checker refuses the export";
  std::vector<std::string> types;
  for (const ::onnx::NodeProto& n : proto.graph().node()) types.push_back(n.op_type());
  return types;
}

inline bool has(const std::vector<std::string>& types, const std::string& t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

// Runs g's outputs on each feed set (one tensor per placeholder) as built and as exported
// (plain and optimized) and read back; expects ONNX op `op_type` in the export's main
// graph, and baton op `read_back_op` in the graph it reads back as (one graph for every
// feed set: nothing made the import depend on input values).
inline void expect_round_trip(Graph& g, const std::vector<Tensor>& placeholders, const std::vector<Tensor>& outputs,
                              const std::vector<std::vector<Tensor>>& feed_sets, const std::string& op_type,
                              const std::string& read_back_op) {
  g.set_outputs(outputs);
  Session session(g);
  for (bool optimized : {false, true}) {
    const std::string bytes = onnx::save_bytes(g, {.optimized = optimized});
    EXPECT_TRUE(has(op_types(bytes), op_type)) << op_type << " missing (optimized " << optimized << ")";
    onnx::Model m = onnx::load_bytes(bytes, "control.onnx");
    EXPECT_NE(m.graph().to_text().find(" = " + read_back_op + "("), std::string::npos)
        << "read back without " << read_back_op << ":\n" << m.graph().to_text();
    for (const std::vector<Tensor>& inputs : feed_sets) {
      Session::Feeds feeds;
      for (size_t i = 0; i < inputs.size(); ++i) feeds.emplace_back(placeholders[i], inputs[i]);
      const std::vector<Tensor> want = session.run(outputs, feeds), got = m.run(inputs);
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < want.size(); ++i) {
        onnx::Comparison c = onnx::compare(got[i], want[i], {.rtol = 1e-5, .atol = 1e-5});
        EXPECT_TRUE(c.ok()) << "output " << i << " (optimized " << optimized << "): " << c.problem;
      }
    }
  }
}

}  // namespace baton
