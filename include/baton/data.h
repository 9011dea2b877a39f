// Data sets and batching.
//
//   auto train = data::FashionMNIST::load(data::kFashionMnistDir, /*train=*/true);
//   data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});
//   for (const data::Batch& b : loader) { ... b.input [64,1,28,28] f32, b.target [64] i64 ... }
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "baton/tensor.h"

namespace baton::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Reads an IDX file (plain or gzip-compressed): unsigned-byte data as i32, int32 data as
// i32, float data as f32, shaped as the header says. A missing, corrupt or truncated
// file is an IOError naming the file.
Tensor read_idx(const std::string& path);

struct Batch {
  Tensor input, target;
};

// Examples held in memory as two tensors whose first dim is the example index.
class TensorDataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets);
  int64_t size() const { return inputs_.shape()[0]; }
  // The examples at `indices`, stacked: a batch.
  Batch get(const std::vector<int64_t>& indices) const;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }
  // The first n examples (a cheap view), for quick runs and tests.
  TensorDataset head(int64_t n) const;

 private:
  Tensor inputs_, targets_;
};

struct Normalize {
  double mean = 0, std = 1;
};
inline constexpr Normalize kFashionMnistNormalize{0.2860, 0.3530};

struct FashionMNIST {
  // images [N, 1, 28, 28] f32 scaled to [0, 1] then (x - mean) / std; labels [N] i64.
  static std::shared_ptr<TensorDataset> load(const std::string& dir, bool train,
                                             Normalize normalize = kFashionMnistNormalize);
};

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = false;
  uint64_t seed = 0;       // shuffling order: epoch e uses seed + e
  bool drop_last = false;  // drop a last, smaller batch
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const TensorDataset> dataset, LoaderOptions options);
  int64_t num_batches() const;
  // Starts a new epoch (a new order when shuffling).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }

  class Iterator {
   public:
    Iterator(const DataLoader* loader, int64_t batch, std::shared_ptr<std::vector<int64_t>> order)
        : loader_(loader), batch_(batch), order_(std::move(order)) {}
    Batch operator*() const;
    Iterator& operator++() { ++batch_; return *this; }
    bool operator!=(const Iterator& o) const { return batch_ != o.batch_; }

   private:
    const DataLoader* loader_;
    int64_t batch_;
    std::shared_ptr<std::vector<int64_t>> order_;
  };
  Iterator begin() const;
  Iterator end() const;

 private:
  std::shared_ptr<const TensorDataset> dataset_;
  LoaderOptions options_;
  int64_t epoch_ = 0;
};

}  // namespace baton::data
