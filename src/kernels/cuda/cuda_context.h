// What every CUDA op receives: the device, its one stream, and the memory of each purpose
// (device_arena.h). Ops enqueue work on `stream` and return without synchronizing; the backend's
// synchronize(), download() and the ops that must read results back (sample) wait.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/graph_recorder.h"
#include "kernels/cuda/weight_upload.h"

namespace fp4serve::kernels::cuda {

// cudaSetDevice(ordinal); returns it (throws CudaError).
int select_device(int ordinal);

// The weight loader's staging buffer size: WeightUploader::kBufferBytes, or FP4SERVE_CUDA_STAGING_BYTES
// (at least 4096; tests/cuda runs the harness's linear and MoE cases with tiny buffers, so that every
// weight goes in many pieces through reused buffers).
std::size_t staging_buffer_bytes();

// Which sequences' block tables (host table, keys) an upload of padded tables holds (attention_cuda.cu).
using GraphTableKey = std::pair<const int32_t*, int64_t>;

struct CudaContext {
  explicit CudaContext(const DeviceInfo& device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  DeviceInfo info;
  int selected = select_device(info.ordinal);  // before the arenas: their memory is on this device
  cudaStream_t stream = nullptr;
  DeviceArena weights{"weights", std::size_t{256} << 20};
  // Fills `weights` at load through pinned staging buffers and a copy stream of its own
  // (weight_upload.h); destroyed before the arena, so its copies finish first. Ops and transfers on
  // `stream` fence() it first (the backend does).
  WeightUploader loader{staging_buffer_bytes()};
  ScratchArena scratch;
  StagingRing staging;
  // Step graphs (graph_recorder.h): eager unless a capture or a replay's fill runs.
  GraphRecorder graph;
  // reserve()'s limits: the graph table buffer (step_graph.h, place_graph_tables) is sized by them.
  int64_t max_context = 0;
  int64_t max_seqs = 0;
  // Block tables of captured forwards (attention_cuda.cu): one device buffer, allocated at the first
  // capture, shared by all graphs; key and device: what the current forward placed (reset when a
  // capture or fill starts), used: its entries so far.
  struct {
    std::vector<GraphTableKey> key;
    const int32_t* device = nullptr;
    int32_t* buffer = nullptr;
    std::size_t capacity = 0, used = 0;  // entries
  } graph_tables;
  // The last I32 upload through Backend::upload (the step's token ids), kept on the host so that
  // embedding can name a bad id without reading the device back (illegal inside a graph capture).
  const void* last_ids_device = nullptr;
  std::vector<int32_t> last_ids;
  std::string last_op;       // for errors reported by a later synchronize
  bool sync_each_op = false;  // FP4SERVE_CUDA_SYNC=1

  // Host-side objects a handle points to (LinearHandle::impl, MoeHandle::impl): kept for the
  // backend's lifetime at a stable address.
  template <class T>
  T* keep(T value) {
    auto p = std::make_shared<T>(std::move(value));
    T* raw = p.get();
    owned_.push_back(std::move(p));
    return raw;
  }

  // A host span on the device for the kernels of the current op (staging ring; large spans go
  // through scratch).
  // While a graph is captured or filled, each upload has its own slot instead (upload_slot).
  template <class T>
  const T* upload(std::span<const T> host, std::string_view what) {
    if (host.empty()) return nullptr;
    if (graph.mode() != GraphMode::kEager)
      return static_cast<const T*>(upload_slot(host.data(), host.size_bytes(), what));
    void* fallback = host.size_bytes() > staging.half_bytes() ? scratch.take(host.size_bytes(), what) : nullptr;
    return static_cast<const T*>(staging.upload(host.data(), host.size_bytes(), stream, fallback));
  }

 private:
  // The next upload slot of the captured forward: `bytes` copied into its pinned memory. Returns
  // its device memory (which the graph fills from the pinned memory when it starts).
  const void* upload_slot(const void* host, std::size_t bytes, std::string_view what);

  std::deque<std::shared_ptr<void>> owned_;
};

}  // namespace fp4serve::kernels::cuda
