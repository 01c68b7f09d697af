// Start-up phase timings for `serve`'s log: each phase's wall time and the total to ready, one line:
//   Start-up: locate 0.00 s, load 0.31 s, map weights 0.05 s, tokenizer 0.62 s, cache plan 0.01 s,
//   server 0.00 s; ready in 1.02 s
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace fp4serve::tools {

class StartupPhases {
 public:
  StartupPhases() : start_(std::chrono::steady_clock::now()), last_(start_) {}
  // Ends the current phase under `name` (its time runs from the previous mark).
  void mark(std::string name) {
    const auto now = std::chrono::steady_clock::now();
    phases_.emplace_back(std::move(name), std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
  double total_seconds() const { return std::chrono::duration<double>(last_ - start_).count(); }
  const std::vector<std::pair<std::string, double>>& phases() const { return phases_; }
  std::string line() const;

 private:
  std::chrono::steady_clock::time_point start_, last_;
  std::vector<std::pair<std::string, double>> phases_;
};

}  // namespace fp4serve::tools
