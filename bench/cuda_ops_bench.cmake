# The CUDA op benchmark (bench/cuda_ops_bench.cpp): a plain executable timed with CUDA events, built
# with the CUDA backend (the full build with FP4SERVE_BENCH, and FP4SERVE_KERNELS_ONLY) and run by
# scripts/gpu-check.sh. Not a google-benchmark binary: it needs no library beyond the backend's.
add_executable(cuda_ops_bench ${PROJECT_SOURCE_DIR}/bench/cuda_ops_bench.cpp)
target_link_libraries(cuda_ops_bench PRIVATE fp4serve_cuda fp4serve_kernels fp4serve_tensor)
target_compile_options(cuda_ops_bench PRIVATE ${FP4SERVE_WARNINGS})
# build/bench/cuda_ops_bench in both builds (the kernels-only one includes this file from the top).
set_target_properties(cuda_ops_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
# The benchmark's own setup (every case's shapes, views and descriptors) checked on every CI run, where
# there is no GPU: each case once, at small sizes, through the CPU backend (a few seconds).
if(FP4SERVE_TESTS)
  add_test(NAME cuda_ops_bench_cpu_check
           COMMAND cuda_ops_bench ${CMAKE_BINARY_DIR}/cuda_ops_bench_cpu_check --cpu-check)
  set_tests_properties(cuda_ops_bench_cpu_check PROPERTIES LABELS "cuda-build" TIMEOUT 300)
endif()
