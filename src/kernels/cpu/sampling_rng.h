// Counter-based random numbers for sampling: Philox4x32-10 (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11), the generator behind torch's CUDA RNG and cuRAND.
//
// Why counter-based: a seeded request's draw at output position `step` is a pure function of
// (seed, step). It does not depend on which other requests share the batch, on the row order, on
// the thread that samples the row, or on preemption and recompute (the position is the same when
// the request resumes). vLLM gets the same guarantee from one torch.Generator per seeded request;
// our streams are not bit-identical to torch's (that would need torch's exponential_ kernel), only
// equally reproducible.
#pragma once

#include <array>
#include <cstdint>

namespace fp4serve::kernels::cpu {

// One Philox4x32-10 block: 128 random bits for (key, counter).
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 2> key, std::array<uint32_t, 4> counter);

// Stream ids separate the uses of one key, so a seeded request's draws and the engine's draws for
// unseeded requests never collide even if a user picks the engine's seed.
enum class RngStream : uint32_t { kSeededRequest = 0x5eed0001u, kEngine = 0xe1e10002u };

// A uniform double in [0, 1) with 53 random bits, for draw number `index` of `stream` under `key`.
double philox_uniform(uint64_t key, RngStream stream, uint64_t index);

}  // namespace fp4serve::kernels::cpu
