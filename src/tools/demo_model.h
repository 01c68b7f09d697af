// The built-in demo model `fp4serve serve` runs when no MODEL is given: a `synth` model of the
// "demo" preset (tiny widths, the real vocabulary) plus the real Qwen tokenizer files, made once
// into the user's cache directory so the README's first command works on a fresh machine.
#pragma once

#include <string>

namespace fp4serve::tools {

// Returns the demo model directory, creating it on first use. Throws with what is missing (the
// tokenizer files come from tools/reference/fetch_tokenizers.sh, which scripts/setup.sh runs).
std::string ensure_demo_model();

}  // namespace fp4serve::tools
