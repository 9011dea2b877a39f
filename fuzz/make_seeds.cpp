// Writes the generated part of the fuzz seed corpus (fuzz/README.md):
//   <out>/checkpoint/  small checkpoints made with save_tensors and save_checkpoint
//   <out>/idx/         small IDX files, plain and gzip-compressed
//   <out>/graph_text/  the text form of small graphs built with the Graph API
//   <out>/onnx/        small models written by onnx::save_bytes
//   <out>/npy/         .npy files of every dtype baton has
// Usage: fuzz_make_seeds <corpus folder>. Deterministic: rerunning rewrites the same bytes.
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/npy.h"
#include "baton/onnx.h"

namespace fs = std::filesystem;
using namespace baton;

namespace {

fs::path out_dir;

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

std::shared_ptr<nn::Module> make_model() {  // the same model as checkpoint_fuzz.cpp
  return nn::sequential({std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::BatchNorm1d>(2)});
}

void train_one_step(nn::Module& model, optim::Optimizer& opt) {
  Tensor loss = sum(model(arange(0, 12, 1, f32).reshape({4, 3})));
  opt.zero_grad();
  loss.backward();
  opt.step();
}

void checkpoints() {
  const fs::path dir = out_dir / "checkpoint";
  fs::create_directories(dir);
  manual_seed(1);
  io::save_tensors(dir / "tensors_all_dtypes.ckpt",
                   {{"f32", arange(0, 6, 1, f32).reshape({2, 3})},
                    {"f64", tensor<double>({0.5, -2.0})},
                    {"i32", tensor<int32_t>({1, 2, 3})},
                    {"i64", scalar_tensor<int64_t>(7)},
                    {"b8", ones({2, 2}, b8)},
                    {"empty", zeros({0, 3})}});
  io::save_tensors(dir / "no_tensors.ckpt", {});
  {
    auto model = make_model();
    io::save_checkpoint(dir / "model_only.ckpt", *model, nullptr, 1);
    optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    train_one_step(*model, sgd);
    io::save_checkpoint(dir / "model_sgd_momentum.ckpt", *model, &sgd, 3);
  }
  {
    auto model = make_model();
    optim::Adam adam(model->parameters());
    train_one_step(*model, adam);
    train_one_step(*model, adam);
    io::save_checkpoint(dir / "model_adam.ckpt", *model, &adam, 2);
  }
  {
    auto other = nn::sequential({std::make_shared<nn::Linear>(4, 2)});  // another architecture
    io::save_checkpoint(dir / "other_model.ckpt", *other, nullptr, 0);
  }
  for (const auto& e : fs::directory_iterator(dir)) std::printf("%s (%ju bytes)\n", e.path().c_str(), e.file_size());
}

// header: 0, 0, type, rank; dims as big-endian u32; then `data` (already big-endian).
std::string idx_bytes(unsigned char type, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string out{'\0', '\0', char(type), char(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out += char((d >> s) & 0xff);
  return out + data;
}

std::string gzip(const std::string& bytes) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // +16: gzip wrapper
  std::string out(deflateBound(&z, uLong(bytes.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_files() {
  const fs::path dir = out_dir / "idx";
  fs::create_directories(dir);
  std::string u8_data;
  for (int i = 0; i < 12; ++i) u8_data += char(i * 20);
  const std::string images = idx_bytes(0x08, {3, 2, 2}, u8_data);
  write_file(dir / "u8_images.idx", images);
  write_file(dir / "u8_images.idx.gz", gzip(images));
  const std::string labels = idx_bytes(0x08, {5}, std::string("\x01\x09\x00\x03\x07", 5));
  write_file(dir / "u8_labels.idx", labels);
  write_file(dir / "u8_labels.idx.gz", gzip(labels));
  write_file(dir / "i8.idx", idx_bytes(0x09, {4}, std::string("\x80\xff\x00\x7f", 4)));
  write_file(dir / "i16.idx", idx_bytes(0x0B, {2, 1}, std::string("\x80\x00\x01\x02", 4)));
  write_file(dir / "i32.idx", idx_bytes(0x0C, {2}, std::string("\x00\x00\x00\x05\xff\xff\xff\xfe", 8)));
  const std::string f32 = idx_bytes(0x0D, {1, 2}, std::string("\x3f\x80\x00\x00\xc0\x00\x00\x00", 8));
  write_file(dir / "f32.idx", f32);
  write_file(dir / "f32.idx.gz", gzip(f32));
  write_file(dir / "f64.idx", idx_bytes(0x0E, {1}, std::string("\x3f\xf0\x00\x00\x00\x00\x00\x00", 8)));
  write_file(dir / "empty_dim.idx", idx_bytes(0x08, {0, 4}, ""));
}

void graph_text(const std::string& name, Graph& g, const std::vector<Tensor>& outputs) {
  g.set_outputs(outputs);
  const fs::path dir = out_dir / "graph_text";
  fs::create_directories(dir);
  write_file(dir / (name + ".txt"), g.to_text());
}

// Ops whose sizes or dims are values computed from x (on ones: a [2, 2] shape): reshape_to,
// expand_to, range_of, resize, cumsum, sum_over, unsqueeze_at, squeeze_at; and topk.
std::vector<Tensor> shaped_by_values(const Tensor& x) {
  const Tensor shape = cast(x + 1.0f, i64);
  const Tensor wide = expand_to(x, shape);
  const Tensor total = x.sum();
  ResizeOptions linear;
  linear.mode = "linear";
  const Tensor resized = resize(reshape(x, {1, 2}), abs(x) + 1.0f, linear);
  const Tensor zero = cast(total * 0.0f, i64);
  const Tensor running = cumsum(x, zero);
  const Tensor first = reshape(zero, {1});
  const Tensor summed = sum_over(wide, first, true);
  const Tensor squeezed = squeeze_at(unsqueeze_at(x, first), first);
  return {reshape_to(wide * 3.0f, shape, true), range_of(total * 0.0f, total, scalar_tensor<float>(0.5f)), resized,
          running, summed, squeezed, topk(x, 1).values};
}

void graphs() {
  manual_seed(2);
  {
    Graph g("mlp");
    Tensor x = g.placeholder(f32, {"batch", 4}, "x");
    Tensor w = g.placeholder(f32, {4, 3}, "w");
    Tensor b = g.placeholder(f32, {3}, "b");
    graph_text("traced_mlp", g, {softmax(relu(linear(x, transpose(w, 0, 1), b)), 1)});
  }
  {
    Graph g("cnn");
    Tensor x = g.placeholder(f32, {"batch", 1, 6, 6}, "x");
    Tensor w = g.placeholder(f32, {2, 1, 3, 3}, "w");
    Tensor y = max_pool2d(relu(conv2d(x, w)), {.kernel = {2, 2}});
    graph_text("traced_cnn", g, {reshape(y, {-1, 8})});
  }
  {
    Graph g("train_step");
    Tensor x = g.placeholder(f64, {"batch", 4}, "x");
    Tensor t = g.placeholder(f64, {"batch", 3}, "t");
    Tensor w = g.variable(zeros({4, 3}, f64), "w");
    Tensor loss = mse_loss(tanh(matmul(x, w)), t);
    std::vector<Tensor> grads = grad(loss, {w});
    graph_text("traced_train_step", g, {loss, assign(w, w - grads[0] * 0.5)});
  }
  {
    Graph g("classify");
    Tensor x = g.placeholder(f32, {"n", 5}, "logits");
    Tensor y = g.placeholder(i64, {"n"}, "labels");
    graph_text("traced_cross_entropy", g, {cross_entropy(x, y), log_softmax(x, 1)});
  }
  {
    Graph g("mixed");
    Tensor a = g.placeholder(i32, {2, 3}, "a");
    Tensor c = g.placeholder(b8, {2, 3}, "c");
    Tensor f = cast(a, f64);
    Tensor s = where(c, f, f * 2.0);
    graph_text("traced_mixed_dtypes", g, {cat({s, s}, 0), sum(s, {1}, true), mean(s)});
  }
  {
    Graph g("views");
    Tensor x = g.placeholder(f32, {2, 3, 4}, "x");
    Tensor p = permute(x, {2, 0, 1});
    Tensor e = expand(slice(x, 2, 0, 1), {2, 3, 5});
    Tensor i = g.placeholder(i64, {2, 3, 2}, "i");
    graph_text("traced_views", g, {p, e, gather(x, 2, i)});
  }
  {
    Graph g("norms");
    Tensor x = g.placeholder(f32, {"batch", 4}, "x");
    Tensor gamma = g.placeholder(f32, {4}, "gamma");
    Tensor beta = g.placeholder(f32, {4}, "beta");
    graph_text("traced_layer_norm", g, {layer_norm(x, {4}, gamma, beta)});
  }
  {  // sizes only the values decide: a staged plan
    Graph g("value_sized");
    Tensor x = g.placeholder(f32, {"n", 3}, "x");
    Tensor at = nonzero(x - 1.0f);
    UniqueResult u = unique(x, 0);
    graph_text("traced_value_sized", g, {cast(at, f32).sum(), u.values * 2.0f, u.counts});
  }
  {  // shapes and bounds read from values when the graph runs
    Graph g("shaped_by_values");
    Tensor x = g.placeholder(f32, {2}, "x");
    graph_text("traced_shaped_by_values", g, shaped_by_values(x));
  }
}

}  // namespace

// Graphs of one placeholder: an MLP, a small CNN, a few shape and reduction ops, text.
void onnx_models() {
  const fs::path dir = out_dir / "onnx";
  fs::create_directories(dir);
  manual_seed(2);
  auto save = [&](const std::string& name, Graph& g, const Tensor& y) {
    g.set_outputs({y});
    write_file(dir / (name + ".onnx"), onnx::save_bytes(g));
  };
  {
    Graph g;
    Tensor x = g.placeholder(f32, {"batch", 4}, "x");
    auto mlp = nn::sequential({std::make_shared<nn::Linear>(4, 3), nn::ReLU(),
                               std::make_shared<nn::Linear>(3, 2)});
    save("mlp", g, softmax(mlp->forward(x), 1));
  }
  {
    Graph g;
    Tensor x = g.placeholder(f32, {1, 1, 6, 6}, "x");
    auto conv = std::make_shared<nn::Conv2d>(1, 2, 3);
    save("conv_pool", g, max_pool2d(relu(conv->forward(x)), {.kernel = {2, 2}}));
  }
  {
    Graph g;
    Tensor x = g.placeholder(f32, {2, 3, 4}, "x");
    save("shape_ops", g, sum(cat({x.permute({0, 2, 1}).reshape({2, 12}), slice(x, 2, 1, 3).reshape({2, 6})}, 1), {1}));
  }
  {
    Graph g;
    Tensor x = g.placeholder(f32, {3}, "x");
    save("strings", g, cast(change_case(cast(x, DType::string), CaseChange::upper), f32));
  }
  {
    Graph g;
    Tensor x = g.placeholder(f32, {"n", 2}, "x");
    save("value_sized", g, cast(nonzero(x), f32).sum() + unique(x, 0).values.sum());
  }
  {
    Graph g;
    Tensor x = g.placeholder(f32, {2}, "x");
    std::vector<Tensor> outs = shaped_by_values(x);
    g.set_outputs(outs);
    write_file(dir / "shaped_by_values.onnx", onnx::save_bytes(g));
  }
}

void npy_files() {
  const fs::path dir = out_dir / "npy";
  fs::create_directories(dir);
  write_file(dir / "f32.npy", npy::to_bytes(arange(0, 6, 1, f32).reshape({2, 3})));
  write_file(dir / "f64_scalar.npy", npy::to_bytes(scalar_tensor<double>(1.5)));
  write_file(dir / "i32.npy", npy::to_bytes(tensor<int32_t>({1, -2, 3})));
  write_file(dir / "i64_empty.npy", npy::to_bytes(zeros({0, 2}, i64)));
  write_file(dir / "b8.npy", npy::to_bytes(ones({3}, b8)));
  write_file(dir / "strings.npy", npy::to_bytes(tensor<std::string>({{"a", "été"}, {"", "xyz"}})));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus folder>\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  checkpoints();
  idx_files();
  graphs();
  onnx_models();
  npy_files();
  return 0;
}
