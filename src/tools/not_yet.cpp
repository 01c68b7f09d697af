// Subcommands whose issues have not landed yet. Each refuses with a message naming the issue that
// brings it, so nobody mistakes a missing feature for a silent success. A tool moves out of this
// file into its own when it is implemented.
#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>

#include "tools/commands.h"

namespace fp4serve::tools {
namespace {

void register_pending(CLI::App& app, const std::string& name, const std::string& what,
                      const std::string& issue) {
  auto* cmd = app.add_subcommand(name, what + " (not implemented yet: " + issue + ")");
  cmd->allow_extras();
  cmd->callback([name, issue] {
    throw std::runtime_error("'fp4serve " + name + "' is not implemented yet (" + issue + ")");
  });
}

}  // namespace

void register_canary(CLI::App& app) {
  register_pending(app, "canary", "correctness canary", "issue 7");
}

}  // namespace fp4serve::tools
