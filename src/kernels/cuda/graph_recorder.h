// The host half of step graphs (Backend::capture_step / replay_step on CUDA): what a captured forward
// launched and uploaded, and the check that a replay's forward does exactly the same. Plain C++ (no
// CUDA): the launchers (graph_launch.cuh) and uploads (step_graph.cpp) report to it, the CPU tests
// check it (tests/unit/kernels/cuda_graph_recorder_test.cpp).
//
// Three modes:
//   eager    the default: every launch runs, nothing is recorded.
//   capture  the forward runs once under CUDA stream capture: each launch is recorded (its
//            signature: op, kernel, grid, block, dynamic shared memory, argument bytes) and then
//            enqueued (into the graph); the k-th upload of the forward gets slot k, memory of its
//            own that the graph keeps (pinned host bytes, copied by a memcpy node).
//   fill     a replay: the forward runs again; each launch's signature is compared with the one
//            captured at the same ordinal and nothing is enqueued; the k-th upload writes its bytes
//            into slot k. Any difference (a grid, a scalar argument, a pointer, an upload's size,
//            one launch more or less) throws GraphMismatch naming the op and what differs: a
//            forward that is not graph-safe fails loudly instead of replaying stale values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::kernels::cuda {

enum class GraphMode : uint8_t { kEager, kCapture, kFill };

// One device operation of a captured forward, as the launch check compares it.
struct LaunchSignature {
  std::string op;                  // "attention items", "upload", "copy"
  const void* func = nullptr;      // the kernel; nullptr for a copy or memset
  std::array<uint32_t, 3> grid{};  // copies: {0, 0, 0}
  std::array<uint32_t, 3> block{};
  std::size_t smem = 0;
  std::vector<uint8_t> args;       // the kernel's argument bytes (padding cleared); copies: dst, src, sizes
};

// Where two signatures differ, e.g. "grid (12,2,1) vs captured (9,2,1)"; "" when they are equal.
// Checked in order: op, kernel, grid, block, shared memory, argument count of bytes, argument bytes.
std::string signature_difference(const LaunchSignature& now, const LaunchSignature& captured);

// One upload of the captured forward: `bytes` at `host` (pinned), copied by the graph to `device`
// (the slot's own device memory for ctx.upload; nullptr for Backend::upload, whose destination is
// the caller's buffer).
struct UploadSlot {
  std::size_t bytes = 0;
  std::string what;
  void* host = nullptr;
  void* device = nullptr;
};

// What one capture recorded; owned by the step graph, read by its replays.
struct GraphRecording {
  std::vector<LaunchSignature> launches;
  std::vector<UploadSlot> uploads;
};

// A forward's launches or uploads differ from the capture's.
struct GraphMismatch : std::runtime_error {
  explicit GraphMismatch(const std::string& what) : std::runtime_error(what) {}
};

class GraphRecorder {
 public:
  // Gives a new slot its memory (host, and device when `device` is asked); the CUDA side allocates
  // pinned and device memory, the tests plain memory.
  using SlotAllocator = std::function<void(UploadSlot& slot, bool device)>;

  GraphMode mode() const { return mode_; }

  // Starts recording into `rec` (emptied). Throws std::logic_error unless eager.
  void begin_capture(GraphRecording& rec, SlotAllocator allocate);
  // Starts a replay's fill against `rec`. Throws std::logic_error unless eager.
  void begin_fill(GraphRecording& rec);
  // Back to eager. After a fill, throws GraphMismatch when the forward issued fewer launches or
  // uploads than the capture did (after the mode is reset, so the backend stays usable).
  void end();
  // Back to eager without checks (a forward that threw).
  void abort();

  // A launch or copy an op is about to enqueue. Returns whether to enqueue it: eager and capture yes
  // (capture records it first), fill no (it is compared with the captured one at this ordinal).
  bool on_launch(LaunchSignature&& s);

  // The slot of the next upload of `bytes` bytes. Capture: a new slot (allocated); fill: the slot of
  // the same ordinal, after checking the size. Throws std::logic_error in eager mode.
  UploadSlot& next_upload(std::size_t bytes, std::string_view what, bool device);

  std::size_t launches_seen() const { return launch_; }
  std::size_t uploads_seen() const { return upload_; }

 private:
  GraphMode mode_ = GraphMode::kEager;
  GraphRecording* rec_ = nullptr;
  SlotAllocator allocate_;
  std::size_t launch_ = 0, upload_ = 0;
};

// Appends the bytes of a trivially copyable value to a signature's argument bytes.
template <class T>
void append_bytes(std::vector<uint8_t>& out, const T& v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

}  // namespace fp4serve::kernels::cuda
