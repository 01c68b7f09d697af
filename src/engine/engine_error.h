// Error types of the engine's bookkeeping layer (scheduler, KV cache, state pool).
#pragma once

#include <stdexcept>
#include <string>

namespace fp4serve::engine {

// A configuration the engine refuses at start-up (the message carries the arithmetic).
class EngineConfigError : public std::runtime_error {
 public:
  explicit EngineConfigError(const std::string& what) : std::runtime_error(what) {}
};

// A violated invariant inside the engine (invalid state transition, double free, ...):
// a bug in the caller or in the engine, never a user error.
class EngineLogicError : public std::logic_error {
 public:
  explicit EngineLogicError(const std::string& what) : std::logic_error(what) {}
};

}  // namespace fp4serve::engine
