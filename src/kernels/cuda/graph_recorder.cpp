#include "kernels/cuda/graph_recorder.h"

#include <fmt/format.h>

#include <utility>

namespace fp4serve::kernels::cuda {
namespace {

std::string dims(const std::array<uint32_t, 3>& d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); }

// "launch 57 (attention items)" for error messages.
std::string where(std::size_t ordinal, const std::string& op) { return fmt::format("launch {} ({})", ordinal, op); }

}  // namespace

std::string signature_difference(const LaunchSignature& now, const LaunchSignature& cap) {
  if (now.op != cap.op) return fmt::format("op {} vs captured {}", now.op, cap.op);
  if (now.func != cap.func) return fmt::format("kernel {} vs captured {}", now.func, cap.func);
  if (now.grid != cap.grid) return fmt::format("grid {} vs captured {}", dims(now.grid), dims(cap.grid));
  if (now.block != cap.block) return fmt::format("block {} vs captured {}", dims(now.block), dims(cap.block));
  if (now.smem != cap.smem) return fmt::format("dynamic shared memory {} vs captured {} bytes", now.smem, cap.smem);
  if (now.args.size() != cap.args.size())
    return fmt::format("{} argument bytes vs captured {}", now.args.size(), cap.args.size());
  for (std::size_t i = 0; i < now.args.size(); ++i)
    if (now.args[i] != cap.args[i])
      return fmt::format("argument byte {} is {:#04x} vs captured {:#04x} (a scalar or pointer argument that "
                         "changes per step: it must come from staged data)",
                         i, now.args[i], cap.args[i]);
  return {};
}

void GraphRecorder::begin_capture(GraphRecording& rec, SlotAllocator allocate) {
  if (mode_ != GraphMode::kEager) throw std::logic_error("cuda graph: capture started while a capture or replay runs");
  rec.launches.clear();
  rec.uploads.clear();
  rec_ = &rec;
  allocate_ = std::move(allocate);
  launch_ = upload_ = 0;
  mode_ = GraphMode::kCapture;
}

void GraphRecorder::begin_fill(GraphRecording& rec) {
  if (mode_ != GraphMode::kEager) throw std::logic_error("cuda graph: replay started while a capture or replay runs");
  rec_ = &rec;
  launch_ = upload_ = 0;
  mode_ = GraphMode::kFill;
}

void GraphRecorder::abort() {
  mode_ = GraphMode::kEager;
  rec_ = nullptr;
  allocate_ = nullptr;
}

void GraphRecorder::end() {
  const GraphMode was = mode_;
  const GraphRecording* rec = rec_;
  const std::size_t launches = launch_, uploads = upload_;
  abort();
  if (was != GraphMode::kFill) return;
  if (launches != rec->launches.size())
    throw GraphMismatch(fmt::format("cuda graph replay: the forward issued {} launches, the capture {} (next captured: {})",
                                    launches, rec->launches.size(), rec->launches[launches].op));
  if (uploads != rec->uploads.size())
    throw GraphMismatch(fmt::format("cuda graph replay: the forward made {} uploads, the capture {} (next captured: {})",
                                    uploads, rec->uploads.size(), rec->uploads[uploads].what));
}

bool GraphRecorder::on_launch(LaunchSignature&& s) {
  switch (mode_) {
    case GraphMode::kEager:
      return true;
    case GraphMode::kCapture:
      rec_->launches.push_back(std::move(s));
      ++launch_;
      return true;
    case GraphMode::kFill:
      break;
  }
  if (launch_ >= rec_->launches.size())
    throw GraphMismatch(fmt::format("cuda graph replay: {}: one launch more than the capture's {}", s.op,
                                    rec_->launches.size()));
  const LaunchSignature& cap = rec_->launches[launch_];
  if (std::string d = signature_difference(s, cap); !d.empty())
    throw GraphMismatch(fmt::format("cuda graph replay: {}: {} ({} of {})", s.op, d, where(launch_, cap.op),
                                    rec_->launches.size()));
  ++launch_;
  return false;
}

UploadSlot& GraphRecorder::next_upload(std::size_t bytes, std::string_view what, bool device) {
  if (mode_ == GraphMode::kEager) throw std::logic_error("cuda graph: an upload slot asked for outside capture and replay");
  if (mode_ == GraphMode::kCapture) {
    UploadSlot slot;
    slot.bytes = bytes;
    slot.what = std::string(what);
    allocate_(slot, device);
    rec_->uploads.push_back(std::move(slot));
    ++upload_;
    return rec_->uploads.back();
  }
  if (upload_ >= rec_->uploads.size())
    throw GraphMismatch(fmt::format("cuda graph replay: {}: one upload more than the capture's {}", what,
                                    rec_->uploads.size()));
  UploadSlot& slot = rec_->uploads[upload_];
  if (slot.what != what || slot.bytes != bytes || (slot.device != nullptr) != device)
    throw GraphMismatch(fmt::format("cuda graph replay: {}: upload {} of {} bytes vs captured {} of {} bytes", what,
                                    upload_, bytes, slot.what, slot.bytes));
  ++upload_;
  return slot;
}

}  // namespace fp4serve::kernels::cuda
