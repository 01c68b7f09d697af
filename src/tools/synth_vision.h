// The vision tower's tensors of a synthetic checkpoint: model.visual.* at the shapes of the config's
// vision_config, BF16 as every release stores them (the NVFP4 and FP8 quantizers exclude *visual*).
#pragma once

#include <string_view>

#include "checkpoint/tensor_plan.h"

namespace fp4serve::synth {

// One dense BF16 module per tensor (model::vision_tensor_shapes); empty when the config has no
// vision_config.
TensorPlan make_vision_plan(std::string_view config_json_text);

}  // namespace fp4serve::synth
