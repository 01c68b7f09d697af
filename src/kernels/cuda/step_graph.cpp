#include "kernels/cuda/step_graph.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/device_arena.h"

namespace fp4serve::kernels::cuda {
namespace {

// Small: every captured size has two instances, and a small step's slots take tens of KB.
constexpr std::size_t kSlotChunkBytes = std::size_t{256} << 10;

// cudaMalloc and cudaHostAlloc are forbidden on a thread whose stream captures in thread-local
// mode; slot memory is allocated in relaxed mode (it is not stream work, nothing to capture).
struct RelaxedCapture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
};

}  // namespace

GraphInstance::GraphInstance() {
  check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "capture_step", "event");
}

GraphInstance::~GraphInstance() {
  if (pending_) cudaEventSynchronize(done_);
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  if (done_) cudaEventDestroy(done_);
  for (Chunk& c : chunks_) {
    if (c.host) cudaFreeHost(c.host);
    if (c.device) cudaFree(c.device);
  }
}

void GraphInstance::allocate_slot(UploadSlot& slot, bool device) {
  const std::size_t need = align_up(std::max<std::size_t>(slot.bytes, 1), 64);  // 64: any kernel struct's alignment
  if (chunks_.empty() || chunks_.back().used + need > chunks_.back().size) {
    RelaxedCapture relaxed;
    Chunk c;
    c.size = std::max(kSlotChunkBytes, need);
    chunks_.push_back(c);  // before allocating: the destructor frees what was allocated
    Chunk& b = chunks_.back();
    check(cudaHostAlloc(reinterpret_cast<void**>(&b.host), b.size, cudaHostAllocDefault), "capture_step",
          "pinned upload slots of " + std::to_string(b.size) + " bytes");
    check(cudaMalloc(reinterpret_cast<void**>(&b.device), b.size), "capture_step",
          "device upload slots of " + std::to_string(b.size) + " bytes");
  }
  Chunk& c = chunks_.back();
  slot.host = c.host + c.used;
  slot.device = device ? c.device + c.used : nullptr;
  c.used += need;
}

void GraphInstance::instantiate(cudaGraph_t graph) {
  graph_ = graph;
  // The upload slots' copies: one node per chunk of slot memory, before every root of the captured
  // work (the capture is one stream: one root), instead of a node per upload.
  std::size_t roots = 0;
  check(cudaGraphGetRootNodes(graph_, nullptr, &roots), "capture_step", "root nodes");
  std::vector<cudaGraphNode_t> root(roots);
  if (roots > 0) check(cudaGraphGetRootNodes(graph_, root.data(), &roots), "capture_step", "root nodes");
  for (const Chunk& c : chunks_) {
    if (c.used == 0) continue;
    cudaGraphNode_t copy = nullptr;
    check(cudaGraphAddMemcpyNode1D(&copy, graph_, nullptr, 0, c.device, c.host, c.used, cudaMemcpyHostToDevice),
          "capture_step", "upload slots' copy of " + std::to_string(c.used) + " bytes");
    for (cudaGraphNode_t r : root) check(cudaGraphAddDependencies(graph_, &copy, &r, nullptr, 1), "capture_step", "edge");
  }
  check(cudaGraphGetNodes(graph_, nullptr, &nodes_), "capture_step", "node count");
  check(cudaGraphInstantiate(&exec_, graph_, 0), "capture_step", "instantiate",
        std::to_string(nodes_) + " nodes");
}

void GraphInstance::wait_idle() {
  if (!pending_) return;
  check(cudaEventSynchronize(done_), "replay_step", "waiting for the previous replay (or a fault in it)");
  pending_ = false;
}

void GraphInstance::launch(cudaStream_t stream) {
  check(cudaGraphLaunch(exec_, stream), "replay_step", "launch", std::to_string(nodes_) + " nodes");
  check(cudaEventRecord(done_, stream), "replay_step", "record");
  pending_ = true;
}

namespace {

LaunchSignature copy_signature(const char* op, std::initializer_list<std::size_t> values, const void* dst,
                               const void* src) {
  LaunchSignature s;
  s.op = op;
  append_bytes(s.args, dst);
  append_bytes(s.args, src);
  for (std::size_t v : values) append_bytes(s.args, v);
  return s;
}

}  // namespace

void memcpy_async(CudaContext& ctx, const char* op, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (ctx.graph.mode() != GraphMode::kEager &&
      !ctx.graph.on_launch(copy_signature(op, {bytes, static_cast<std::size_t>(kind)}, dst, src)))
    return;
  check(cudaMemcpyAsync(dst, src, bytes, kind, ctx.stream), op, std::to_string(bytes) + " bytes");
}

void memcpy2d_async(CudaContext& ctx, const char* op, void* dst, std::size_t dpitch, const void* src,
                    std::size_t spitch, std::size_t width, std::size_t rows, cudaMemcpyKind kind) {
  if (ctx.graph.mode() != GraphMode::kEager &&
      !ctx.graph.on_launch(copy_signature(op, {dpitch, spitch, width, rows, static_cast<std::size_t>(kind)}, dst, src)))
    return;
  check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, ctx.stream), op,
        std::to_string(rows) + " rows of " + std::to_string(width) + " bytes");
}

void memset_async(CudaContext& ctx, const char* op, void* dst, std::size_t bytes) {
  if (ctx.graph.mode() != GraphMode::kEager && !ctx.graph.on_launch(copy_signature(op, {bytes}, dst, nullptr))) return;
  check(cudaMemsetAsync(dst, 0, bytes, ctx.stream), op, std::to_string(bytes) + " bytes");
}

void memset2d_async(CudaContext& ctx, const char* op, void* dst, std::size_t pitch, std::size_t width, std::size_t rows) {
  if (ctx.graph.mode() != GraphMode::kEager &&
      !ctx.graph.on_launch(copy_signature(op, {pitch, width, rows}, dst, nullptr)))
    return;
  check(cudaMemset2DAsync(dst, pitch, 0, width, rows, ctx.stream), op,
        std::to_string(rows) + " rows of " + std::to_string(width) + " bytes");
}

void reset_graph_tables(CudaContext& ctx) {
  ctx.graph_tables.key.clear();
  ctx.graph_tables.device = nullptr;
  ctx.graph_tables.used = 0;
}

const int32_t* place_graph_tables(CudaContext& ctx, std::span<const int32_t> tables, int64_t block_size, const char* op) {
  auto& t = ctx.graph_tables;
  if (t.buffer == nullptr) {
    if (ctx.graph.mode() != GraphMode::kCapture)
      throw std::logic_error(std::string(op) + ": block tables in a step graph before any capture");
    const int64_t per_seq = (std::max<int64_t>(ctx.max_context, 1) + block_size - 1) / std::max<int64_t>(block_size, 1);
    t.capacity = static_cast<std::size_t>(2 * std::max<int64_t>(ctx.max_seqs, 1) * per_seq);
    RelaxedCapture relaxed;
    check(cudaMalloc(reinterpret_cast<void**>(&t.buffer), t.capacity * sizeof(int32_t)), "capture_step",
          "block table buffer of " + std::to_string(t.capacity) + " entries");
  }
  if (t.used + tables.size() > t.capacity)
    throw std::out_of_range(std::string(op) + ": " + std::to_string(t.used + tables.size()) +
                            " block-table entries in a step graph exceed its buffer's " + std::to_string(t.capacity) +
                            " (2 x reserve()'s max_seqs x its max_context in blocks)");
  int32_t* at = t.buffer + t.used;
  t.used += tables.size();
  if (ctx.graph.mode() == GraphMode::kFill)
    check(cudaMemcpyAsync(at, tables.data(), tables.size_bytes(), cudaMemcpyHostToDevice, ctx.stream), op,
          "block tables of the step graph, " + std::to_string(tables.size()) + " entries");
  return at;
}

}  // namespace fp4serve::kernels::cuda
