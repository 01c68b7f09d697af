// `fp4serve bench vision`: the vision tower's speed and memory on this machine's CPU backend — the time
// to encode one square image of --image-size pixels (1024: a 64 x 64 patch grid, 1024 LLM tokens) and
// the memory the tower takes (its weights as loaded, and the peak of one encode beyond them).
#pragma once

namespace CLI {
class App;
}

namespace fp4serve::tools::bench {

void add_bench_vision_command(CLI::App& bench);

}  // namespace fp4serve::tools::bench
