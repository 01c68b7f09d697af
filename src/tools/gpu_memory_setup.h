// The CUDA path of load_serving_model: vLLM's memory plan (gpu_memory_plan.h) fed with what this
// process measures on the device -- the weights' bytes (free memory when the backend was created
// minus free memory after the load) and the activation peak (the backend's scratch reserve and one
// step workspace at the engine's step limits, measured the same way and then released) -- and the
// engine's cache plan input. Sets config.cache_memory_bytes to the plan's cache budget.
// Compiled in every build; reached only when --device chose CUDA (no GPU machine has run it yet).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/qwen3_5_moe.h"
#include "tools/engine_setup.h"
#include "tools/gpu_memory_plan.h"

namespace fp4serve::tools {

// The engine's CachePlanInput for this model and config, without its budget (as Engine's
// constructor builds it).
engine::CachePlanInput cache_plan_input(const model::Qwen35MoeModel& model, const engine::EngineConfig& config);

// Measures, plans, sets config.cache_memory_bytes and returns the plan (its log_lines for the
// start-up log). Throws GpuMemoryPlanError when the plan refuses.
GpuMemoryPlan plan_device_memory(const model::Qwen35MoeModel& model, const EngineFlags& flags,
                                 engine::EngineConfig& config);

}  // namespace fp4serve::tools
