#!/usr/bin/env bash
# Makes the resource check's self-test data (scripts/cuda_resource_check.py --self-test): compiles
# the resource_sample_* sources into a small archive shaped like libfp4serve_cuda.a and captures
# cuobjdump's --dump-resource-usage and --list-elf output of it. Needs nvcc and cuobjdump (the same
# lookup as the check: CUOBJDUMP, the toolkit's bin/, PATH, .cache/tools/cuobjdump).
#   tests/data/cuda/capture_resource_sample.sh      rewrites resource_usage_sample.txt, list_elf_sample.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
CUOBJDUMP=$(python3 "$root/scripts/cuda_resource_check.py" --print-cuobjdump)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# As CMake passes CMAKE_CUDA_ARCHITECTURES "90a;120a": SASS and PTX per architecture.
both=("--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]" "--generate-code=arch=compute_120a,code=[compute_120a,sm_120a]")
"$NVCC" -c "$here/resource_sample_spill.cu" -o spill.cu.o -lineinfo "${both[@]}" 2> >(grep -v minnctapersm >&2)
"$NVCC" -c "$here/resource_sample_one_arch.cu" -o one_arch.cu.o "--generate-code=arch=compute_90a,code=[compute_90a,sm_90a]"
g++ -c "$here/resource_sample_host.cpp" -o host.cpp.o
ar rcs libsample.a spill.cu.o host.cpp.o one_arch.cu.o
# cuobjdump names members and sources by absolute path: the directories are cut out.
"$CUOBJDUMP" --dump-resource-usage libsample.a | sed "s|$work/||g; s|$root/||g" > "$here/resource_usage_sample.txt"
"$CUOBJDUMP" --list-elf libsample.a | sed "s|$work/||g; s|$root/||g" > "$here/list_elf_sample.txt"
echo "captured with $("$CUOBJDUMP" --version | tail -1)"
