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
#include "tools/device_choice.h"
#include "tools/engine_setup.h"
#include "tools/gpu_memory_plan.h"
#include "tools/preflight_checks.h"

namespace fp4serve::tools {

// The engine's CachePlanInput for this model and config, without its budget (as Engine's
// constructor builds it).
engine::CachePlanInput cache_plan_input(const model::Qwen35MoeModel& model, const engine::EngineConfig& config);

// Measures, plans, sets config.cache_memory_bytes and returns the plan (its log_lines for the
// start-up log). Throws GpuMemoryPlanError when the plan refuses.
GpuMemoryPlan plan_device_memory(const model::Qwen35MoeModel& model, const EngineFlags& flags,
                                 engine::EngineConfig& config);

// doctor's estimate before anything is loaded: the weights taken as `weight_bytes` (the checkpoint's
// size), the activations not measured (0: the real plan has less for the cache), on device `dev`.
// Throws GpuMemoryPlanError where serve's plan would refuse (or std::runtime_error for a flag).
GpuMemoryPlan preview_gpu_memory_plan(const ModelFacts& model, const EngineFlags& flags, const DeviceMemory& dev,
                                      std::uint64_t weight_bytes);

}  // namespace fp4serve::tools
