// Training progress: a redrawn bar on a terminal, plain periodic lines otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

class Progress {
 public:
  Progress(int epoch, int epochs, int64_t batches, int64_t batch_size);
  // After each batch; loss is that batch's loss.
  void update(int64_t batch, double loss);
  // Ends the epoch's line(s) with a summary.
  void finish(double mean_loss);

 private:
  std::string status(int64_t batch) const;
  int epoch_, epochs_;
  int64_t batches_, batch_size_;
  bool tty_;
  double smoothed_loss_ = 0;
  int64_t next_plain_line_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};
