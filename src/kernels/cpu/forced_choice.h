// A yes-or-no that plans measure, which tests may force so that they run either way on any
// machine (WinogradOverride, ColumnMajorOverride).
#pragma once
#include <atomic>
#include <optional>

namespace baton::kernels {

class ForcedChoice {
 public:
  // The forced answer, or nullopt: measure.
  std::optional<bool> forced() const {
    const int f = state_.load();
    return f < 0 ? std::nullopt : std::optional<bool>(f != 0);
  }

  // Forces `choice` to `answer` while it lives; the answer before comes back after.
  class Scope {
   public:
    Scope(ForcedChoice& choice, bool answer) : choice_(choice), previous_(choice.state_.exchange(answer ? 1 : 0)) {}
    ~Scope() { choice_.state_.store(previous_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ForcedChoice& choice_;
    int previous_;
  };

 private:
  std::atomic<int> state_{-1};  // -1: measure; else the answer
};

}  // namespace baton::kernels
