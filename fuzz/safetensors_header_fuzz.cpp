// libFuzzer target: any byte string given to parse_safetensors_header must either parse into a
// header whose tensors lie inside the buffer and tile its data region, or be refused with a
// CheckpointError. Anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const fp4serve::SafetensorsHeader h = fp4serve::parse_safetensors_header(bytes, "fuzz input");
    uint64_t end = h.data_begin;
    for (const auto& t : h.tensors) {
      // Sorted, contiguous, in bounds, and the size agrees with shape x dtype.
      if (t.file_offset != end || t.file_offset + t.byte_size > size) std::abort();
      if (static_cast<uint64_t>(t.numel()) * fp4serve::dtype_size(t.dtype) != t.byte_size) std::abort();
      if (h.find(t.name) != &t) std::abort();
      end = t.file_offset + t.byte_size;
    }
    if (end != size) std::abort();
  } catch (const fp4serve::CheckpointError&) {
    // Refused with a message: the expected outcome for most inputs.
  }
  return 0;
}
