# The CUDA op benchmark (bench/cuda_ops_bench.cpp): a plain executable timed with CUDA events, built
# with the CUDA backend (the full build with FP4SERVE_BENCH, and FP4SERVE_KERNELS_ONLY) and run by
# scripts/gpu-check.sh. Not a google-benchmark binary: it needs no library beyond the backend's.
add_executable(cuda_ops_bench ${PROJECT_SOURCE_DIR}/bench/cuda_ops_bench.cpp)
target_link_libraries(cuda_ops_bench PRIVATE fp4serve_cuda fp4serve_kernels fp4serve_tensor)
target_compile_options(cuda_ops_bench PRIVATE ${FP4SERVE_WARNINGS})
# build/bench/cuda_ops_bench in both builds (the kernels-only one includes this file from the top).
set_target_properties(cuda_ops_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
