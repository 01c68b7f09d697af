// fp4serve: serve|generate|bench|canary|doctor|inspect|synth. Each subcommand lives in src/tools/.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "tools/commands.h"
#include "tools/engine_process_flags.h"
#ifdef FP4SERVE_HAVE_CUDA
#include "kernels/cuda/nvfp4_dequant.h"
#include "tools/doctor_host.h"
#endif

int main(int argc, char** argv) {
  CLI::App app{"fp4serve: an OpenAI-compatible server for Qwen3.6-35B-A3B (NVFP4, FP8, BF16, INT4)"};
  app.require_subcommand(1);
  fp4serve::tools::set_command_line(argc, argv);  // serve's engine process runs it again
#ifdef FP4SERVE_HAVE_CUDA
  // Only this target knows it was built with CUDA: tell doctor (and the preflight) so.
  fp4serve::tools::set_cuda_backend_describer(
      [] { return "built (sm_90a, sm_120a); " + fp4serve::cuda::describe_devices(); });
#endif
  fp4serve::tools::register_serve(app);
  fp4serve::tools::register_generate(app);
  fp4serve::tools::register_inspect(app);
  fp4serve::tools::register_synth(app);
  fp4serve::tools::register_bench(app);
  fp4serve::tools::register_canary(app);
  fp4serve::tools::register_doctor(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fp4serve: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
