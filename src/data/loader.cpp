#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "baton/data.h"
#include "baton/ops.h"

namespace baton::data {

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(inputs.contiguous()), targets_(targets.contiguous()) {
  if (inputs_.dim() == 0 || targets_.dim() == 0 || inputs_.shape()[0] != targets_.shape()[0])
    throw ShapeError("TensorDataset", str("inputs ", inputs_.shape(), " and targets ",
                                          targets_.shape(), " need the same first dim"),
                     SourceLoc::current());
}

// Copies whole rows (examples) of a contiguous tensor: a batch costs one memcpy each.
static Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Shape shape = t.shape();
  shape[0] = int64_t(rows.size());
  Tensor out = empty(shape, t.dtype());
  const size_t row_bytes = t.nbytes() / size_t(std::max<int64_t>(t.shape()[0], 1));
  const auto* src = static_cast<const char*>(t.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= t.shape()[0])
      throw IndexError("TensorDataset", str("example ", rows[i], " of ", t.shape()[0]),
                       SourceLoc::current());
    std::memcpy(dst + i * row_bytes, src + size_t(rows[i]) * row_bytes, row_bytes);
  }
  return out;
}

Batch TensorDataset::get(const std::vector<int64_t>& indices) const {
  return {take_rows(inputs_, indices), take_rows(targets_, indices)};
}

TensorDataset TensorDataset::head(int64_t n) const {
  n = std::min(n, size());
  return TensorDataset(slice(inputs_, 0, 0, n), slice(targets_, 0, 0, n));
}

std::shared_ptr<TensorDataset> FashionMNIST::load(const std::string& dir, bool train,
                                                  Normalize normalize) {
  const std::string prefix = dir + (train ? "/train" : "/t10k");
  Tensor images = read_idx(prefix + "-images-idx3-ubyte.gz");
  Tensor labels = read_idx(prefix + "-labels-idx1-ubyte.gz");
  if (images.dim() != 3 || labels.dim() != 1 || images.shape()[0] != labels.shape()[0])
    throw IOError("FashionMNIST", str(prefix, ": images ", images.shape(), " and labels ",
                                      labels.shape(), " do not match"), SourceLoc::current());
  const int64_t n = images.shape()[0];
  Tensor x = (images.to(f32) * (1.0 / 255.0) - normalize.mean) * (1.0 / normalize.std);
  return std::make_shared<TensorDataset>(
      x.reshape({n, 1, images.shape()[1], images.shape()[2]}), labels.to(i64));
}

DataLoader::DataLoader(std::shared_ptr<const TensorDataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  if (options.batch_size < 1)
    throw ValueError("DataLoader", str("batch_size must be >= 1, got ", options.batch_size),
                     SourceLoc::current());
}

int64_t DataLoader::num_batches() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

DataLoader::Iterator DataLoader::begin() const {
  auto order = std::make_shared<std::vector<int64_t>>(size_t(dataset_->size()));
  std::iota(order->begin(), order->end(), 0);
  if (options_.shuffle) {
    std::mt19937_64 gen(options_.seed + uint64_t(epoch_));
    // Fisher-Yates with our own index draw: the same order on every standard library.
    for (size_t i = order->size(); i > 1; --i) std::swap((*order)[i - 1], (*order)[gen() % i]);
  }
  return Iterator(this, 0, std::move(order));
}

DataLoader::Iterator DataLoader::end() const { return Iterator(this, num_batches(), nullptr); }

Batch DataLoader::Iterator::operator*() const {
  const int64_t b = loader_->options_.batch_size;
  const auto first = size_t(batch_ * b);
  const size_t last = std::min(order_->size(), first + size_t(b));
  return loader_->dataset_->get(std::vector<int64_t>(order_->begin() + long(first),
                                                      order_->begin() + long(last)));
}

}  // namespace baton::data
