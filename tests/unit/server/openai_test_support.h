// Shared helpers of the openai_* tests.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "server/openai/openai_error.h"
#include "server/openai/request_common.h"

namespace fp4serve::server::openai::testing {

inline ServerLimits test_limits() {
  ServerLimits limits;
  limits.served_model_names = {"qwen3.6"};
  limits.max_model_len = 4096;
  limits.sampling.vocab_size = 248320;
  limits.enable_auto_tool_choice = true;
  return limits;
}

// Runs `fn`, expects an ApiException, returns its error.
inline ApiError expect_api_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no ApiException thrown";
  return ApiError{};
}

}  // namespace fp4serve::server::openai::testing
