#include "progress.h"

#include <unistd.h>

#include <cstdio>

Progress::Progress(int epoch, int epochs, int64_t batches, int64_t batch_size)
    : epoch_(epoch), epochs_(epochs), batches_(batches), batch_size_(batch_size),
      tty_(isatty(STDOUT_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}

static std::string clock_text(double seconds) {
  auto s = int64_t(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

std::string Progress::status(int64_t batch) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? double(batch * batch_size_) / elapsed : 0;
  double eta = batch > 0 ? elapsed / double(batch) * double(batches_ - batch) : 0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "epoch %d/%d  batch %lld/%lld  loss %.4f  %.0f img/s  ETA %s",
                epoch_, epochs_, (long long)batch, (long long)batches_, smoothed_loss_, rate,
                clock_text(eta).c_str());
  return buf;
}

void Progress::update(int64_t batch, double loss) {
  smoothed_loss_ = batch == 1 ? loss : 0.95 * smoothed_loss_ + 0.05 * loss;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (batch != batches_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const int width = 24;
    int filled = int(double(width) * double(batch) / double(batches_));
    std::string bar = std::string(size_t(filled), '=') + (filled < width ? ">" : "") +
                      std::string(size_t(width - std::min(width, filled + 1)), ' ');
    std::printf("\r[%s] %s\033[K", bar.c_str(), status(batch).c_str());
    std::fflush(stdout);
  } else if (batch >= next_plain_line_) {
    std::printf("%s\n", status(batch).c_str());
    std::fflush(stdout);
    next_plain_line_ = batch + std::max<int64_t>(1, batches_ / 5);
  }
}

void Progress::finish(double mean_loss) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (tty_) std::printf("\r\033[K");
  std::printf("epoch %d/%d  mean loss %.4f  %.0f img/s  %s\n", epoch_, epochs_, mean_loss,
              double(batches_ * batch_size_) / elapsed, clock_text(elapsed).c_str());
  std::fflush(stdout);
}
