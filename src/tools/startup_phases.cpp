#include "tools/startup_phases.h"

#include <fmt/format.h>

namespace fp4serve::tools {

std::string StartupPhases::line() const {
  std::string s = "Start-up:";
  for (size_t i = 0; i < phases_.size(); ++i)
    s += fmt::format("{} {} {:.2f} s", i == 0 ? "" : ",", phases_[i].first, phases_[i].second);
  return s + fmt::format("; ready in {:.2f} s", total_seconds());
}

}  // namespace fp4serve::tools
