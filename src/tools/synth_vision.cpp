#include "tools/synth_vision.h"

#include <string>

#include "model/vision_config.h"
#include "model/vision_weights.h"

namespace fp4serve::synth {

TensorPlan make_vision_plan(std::string_view config_json_text) {
  TensorPlan plan;
  const auto config = model::VisionConfig::parse_config_json(config_json_text, "config.json");
  if (!config) return plan;
  for (const auto& [name, shape] : model::vision_tensor_shapes(*config)) {
    PlannedModule m;
    m.path = name.substr(0, name.rfind('.'));
    m.kind = ModuleKind::kDense;
    m.tensors.push_back(PlannedTensor{name, DType::kBF16, shape, false, {}});
    plan.modules.push_back(std::move(m));
  }
  return plan;
}

}  // namespace fp4serve::synth
