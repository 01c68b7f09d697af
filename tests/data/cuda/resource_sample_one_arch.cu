// Input of the resource check's self-test: a clean kernel that capture_resource_sample.sh compiles
// for sm_90a alone, so the fatbinary check must report the missing sm_120a SASS.
__global__ void one_arch_kernel(const float* x, float* out) { out[threadIdx.x] = 2.0f * x[threadIdx.x]; }
