// The fp4serve subcommands. Each tool file registers its own CLI11 subcommand and callback, so
// main.cpp only lists them; a tool's flags and behaviour live with the tool.
#pragma once

namespace CLI {
class App;
}

namespace fp4serve::tools {

void register_serve(CLI::App& app);
void register_generate(CLI::App& app);
void register_inspect(CLI::App& app);
void register_synth(CLI::App& app);
void register_bench(CLI::App& app);
void register_canary(CLI::App& app);
void register_doctor(CLI::App& app);

}  // namespace fp4serve::tools
