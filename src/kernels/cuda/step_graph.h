// A captured step on CUDA (Backend::capture_step): the instantiated graph, what its capture recorded
// (graph_recorder.h: launch signatures, upload slots) and the slots' memory, which the graph's
// memcpy nodes read on every replay.
//
// Slot memory comes from chunks of pinned host and device memory owned by the graph (one allocation
// per chunk, not per upload). A replay fills the pinned slots before launching the graph; it first
// waits for the previous replay of the same graph (`done`), whose copies may still read them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/graph_recorder.h"

namespace fp4serve::kernels::cuda {

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph();
  ~CudaStepGraph() override;
  CudaStepGraph(const CudaStepGraph&) = delete;
  CudaStepGraph& operator=(const CudaStepGraph&) = delete;

  std::size_t num_nodes() const override { return nodes_; }

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

// Copies and memsets of an op, through the recorder as kernel launches are (graph_launch.cuh): the
// signature holds the destination, source and sizes.
void memcpy_async(CudaContext& ctx, const char* op, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
void memcpy2d_async(CudaContext& ctx, const char* op, void* dst, std::size_t dpitch, const void* src,
                    std::size_t spitch, std::size_t width, std::size_t rows, cudaMemcpyKind kind);
void memset_async(CudaContext& ctx, const char* op, void* dst, std::size_t bytes);
void memset2d_async(CudaContext& ctx, const char* op, void* dst, std::size_t pitch, std::size_t width, std::size_t rows);

}  // namespace fp4serve::kernels::cuda
