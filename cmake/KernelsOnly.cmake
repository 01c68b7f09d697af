# FP4SERVE_KERNELS_ONLY: the GPU machine's build (scripts/gpu-check.sh). Only the layers the CUDA
# backend stands on (tensor, kernels), the backend, its gpu-labelled tests and the op benchmark, so
# that a machine with the CUDA toolkit, a C++ compiler, CMake and Ninja needs only fmt, spdlog, OpenMP
# and GoogleTest (scripts/gpu-carry.sh prepares Debian's packages of those for a machine without
# them). The top-level CMakeLists.txt has found Threads, OpenMP, fmt and spdlog and set the warnings.
if(NOT FP4SERVE_CUDA)
  message(FATAL_ERROR "FP4SERVE_KERNELS_ONLY is the CUDA backend's build: configure with -DFP4SERVE_CUDA=ON")
endif()
include(cmake/Cuda.cmake)
include(cmake/Modules.cmake)
# As in CMakeLists.txt (keep the two in step).
fp4serve_module(tensor DEPS fmt::fmt)
fp4serve_module(kernels DEPS fp4serve_tensor OpenMP::OpenMP_CXX)
add_subdirectory(src/kernels/cuda)
if(FP4SERVE_TESTS)
  enable_testing()
  find_package(GTest REQUIRED)
  include(GoogleTest)
  set(FP4SERVE_TEST_DEFS
    FP4SERVE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    FP4SERVE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
    FP4SERVE_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  add_subdirectory(tests/cuda)
endif()
include(bench/cuda_ops_bench.cmake)
