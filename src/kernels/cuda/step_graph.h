// A captured step on CUDA (Backend::capture_step): the instantiated graph, what its capture recorded
// (graph_recorder.h: launch signatures, upload slots) and the slots' memory, which the graph's first
// nodes copy to the device on every replay (one memcpy node per chunk of slots).
//
// Slot memory comes from chunks of pinned host and device memory owned by the graph (one allocation
// per chunk, not per upload). A replay fills the pinned slots before launching the graph; it first
// waits for the last replay of the same instance (`done`), whose copies may still read them. A step
// graph holds two instances of the same step (captured twice: own slots, own graph) and replays them
// in turn, so that filling step N+1 on the host never waits for step N's graph on the device (async
// scheduling), only for step N-1's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/graph_recorder.h"

namespace fp4serve::kernels::cuda {

// One capture of the step: its recording, slots and instantiated graph.
class GraphInstance {
 public:
  GraphInstance();
  ~GraphInstance();
  GraphInstance(const GraphInstance&) = delete;
  GraphInstance& operator=(const GraphInstance&) = delete;

  std::size_t num_nodes() const { return nodes_; }

  // Memory for a new slot (during the capture: allocated in relaxed capture mode).
  void allocate_slot(UploadSlot& slot, bool device);
  // Takes the captured graph and instantiates it.
  void instantiate(cudaGraph_t graph);
  // Waits until the previous replay no longer reads the slots.
  void wait_idle();
  // Enqueues the graph on `stream` and marks the replay's end.
  void launch(cudaStream_t stream);

  GraphRecording recording;

 private:
  struct Chunk {
    char* host = nullptr;
    char* device = nullptr;
    std::size_t used = 0, size = 0;
  };
  std::vector<Chunk> chunks_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t done_ = nullptr;
  bool pending_ = false;
  std::size_t nodes_ = 0;
};

class CudaStepGraph final : public StepGraph {
 public:
  static constexpr int kInstances = 2;
  std::size_t num_nodes() const override { return instances[0] ? instances[0]->num_nodes() : 0; }
  // The instance the next replay uses (in turn).
  GraphInstance& next() {
    GraphInstance& in = *instances[static_cast<std::size_t>(next_)];
    next_ = (next_ + 1) % kInstances;
    return in;
  }

  std::unique_ptr<GraphInstance> instances[kInstances];

 private:
  int next_ = 0;
};

// Copies and memsets of an op, through the recorder as kernel launches are (graph_launch.cuh): the
// signature holds the destination, source and sizes.
void memcpy_async(CudaContext& ctx, const char* op, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
void memcpy2d_async(CudaContext& ctx, const char* op, void* dst, std::size_t dpitch, const void* src,
                    std::size_t spitch, std::size_t width, std::size_t rows, cudaMemcpyKind kind);
void memset_async(CudaContext& ctx, const char* op, void* dst, std::size_t bytes);
void memset2d_async(CudaContext& ctx, const char* op, void* dst, std::size_t pitch, std::size_t width, std::size_t rows);

// Block tables in a step graph (attention_cuda.cu): `tables` (one forward's, compact) placed in the
// context's graph table buffer, returned as their device address. Capture: the buffer is allocated
// at the first capture (2 x reserve's max_seqs x blocks of its max_context at `block_size`: never
// moved, every graph's descriptors point into it) and nothing is copied; fill: the entries are copied
// from the host on the stream, outside the graph, before it is launched (after every earlier replay
// that reads the buffer, in stream order). Throws when they exceed the buffer.
const int32_t* place_graph_tables(CudaContext& ctx, std::span<const int32_t> tables, int64_t block_size, const char* op);
// Starts a forward's placement (capture_step, replay_step).
void reset_graph_tables(CudaContext& ctx);

}  // namespace fp4serve::kernels::cuda
