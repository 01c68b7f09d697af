// The image features of one sequence: each image is encoded by the model's VisionEncoder when a step
// first runs one of its rows, and kept only while the prefill still has rows of it to run (vLLM's
// encoder cache, per sequence). A chunk that ends inside an image takes the slice it needs; a
// prefix-cache hit past an image never encodes it; a recompute after preemption, or a fork child's,
// encodes again. Encoding runs on the calling (engine) thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/multimodal_prompt.h"
#include "model/step_batch.h"
#include "model/vision_encoder.h"

namespace fp4serve::engine {

class ImageFeatures {
 public:
  // The embedding rows of tokens start .. start + n - 1 (model::BatchSequence::embeds, relative to
  // start), encoding the images they reach that are not held. Valid until the next call. Throws
  // std::runtime_error when the encoder returns the wrong number of values.
  std::span<const model::EmbeddingRows> rows_for(const MultimodalPrompt& mm, const model::VisionEncoder& encoder,
                                                 int start, int n);
  // Drops the features of the images that end at or before token `computed`.
  void release_before(const MultimodalPrompt& mm, int computed);
  // Images encoded so far (tests: an image is encoded once per prefill).
  int num_encoded() const { return num_encoded_; }
  std::size_t bytes_held() const;

 private:
  std::vector<std::vector<float>> features_;  // per image; empty: not held
  std::vector<model::EmbeddingRows> rows_;
  int num_encoded_ = 0;
};

}  // namespace fp4serve::engine
