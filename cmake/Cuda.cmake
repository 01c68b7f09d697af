# The CUDA language for FP4SERVE_CUDA builds (the full build and FP4SERVE_KERNELS_ONLY alike).
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# SASS targets. CI builds and checks both (scripts/cuda_resource_check.py requires both); the GPU
# machine's build (scripts/gpu-check.sh) narrows this to its own device to halve the compile time.
set(FP4SERVE_CUDA_ARCHITECTURES "90a;120a" CACHE STRING "CUDA architectures compiled (sm_90a Hopper, sm_120a Blackwell)")
set(CMAKE_CUDA_ARCHITECTURES ${FP4SERVE_CUDA_ARCHITECTURES})
enable_language(CUDA)
# C++20 as the host code (the seam's headers use std::span). CMake 3.25 knows nvcc's dialect flags
# up to C++17 only; nvcc 12+ takes -std=c++20, so the flag is named here.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 20)
find_package(CUDAToolkit REQUIRED)
