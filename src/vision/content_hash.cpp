#include "vision/content_hash.h"

#include <xxhash.h>

namespace fp4serve::vision {

std::array<std::uint64_t, 2> content_hash(const PixelPatches& pixels) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  const std::int64_t header[4] = {pixels.grid.t, pixels.grid.h, pixels.grid.w, pixels.patch_dim};
  XXH3_128bits_update(state, header, sizeof(header));
  XXH3_128bits_update(state, pixels.values.data(), pixels.values.size() * sizeof(float));
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.low64, h.high64};
}

}  // namespace fp4serve::vision
