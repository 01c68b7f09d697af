// The host half of CUDA step graphs (src/kernels/cuda/graph_recorder.h): launch signatures compared
// between a capture and a replay's fill, the upload slot plan, and eager mode left alone.
#if defined(FP4SERVE_HAVE_CUDA)
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/graph_recorder.h"

namespace fp4serve::kernels::cuda {
namespace {

void kernel_a() {}
void kernel_b() {}

LaunchSignature launch(const char* op, void (*fn)(), std::array<uint32_t, 3> grid, int64_t scalar,
                       const void* pointer = nullptr) {
  LaunchSignature s;
  s.op = op;
  s.func = reinterpret_cast<const void*>(fn);
  s.grid = grid;
  s.block = {256, 1, 1};
  append_bytes(s.args, pointer);
  append_bytes(s.args, scalar);
  return s;
}

// Slot memory from the heap (the CUDA side uses pinned and device memory); freed with the fixture.
struct HeapSlots {
  std::vector<std::unique_ptr<char[]>> blocks;
  GraphRecorder::SlotAllocator allocator() {
    return [this](UploadSlot& slot, bool device) {
      blocks.emplace_back(new char[slot.bytes + 1]);
      slot.host = blocks.back().get();
      if (device) {
        blocks.emplace_back(new char[slot.bytes + 1]);
        slot.device = blocks.back().get();
      }
    };
  }
};

TEST(CudaGraphRecorder, SignaturesNameWhatDiffers) {
  const LaunchSignature cap = launch("attention items", kernel_a, {9, 2, 1}, 7);
  EXPECT_EQ(signature_difference(cap, cap), "");
  EXPECT_EQ(signature_difference(launch("attention items", kernel_a, {12, 2, 1}, 7), cap),
            "grid (12,2,1) vs captured (9,2,1)");
  EXPECT_NE(signature_difference(launch("attention items", kernel_b, {9, 2, 1}, 7), cap).find("kernel"),
            std::string::npos);
  EXPECT_EQ(signature_difference(launch("kv_write", kernel_a, {9, 2, 1}, 7), cap),
            "op kv_write vs captured attention items");
  const std::string scalar = signature_difference(launch("attention items", kernel_a, {9, 2, 1}, 8), cap);
  EXPECT_NE(scalar.find("argument byte 8"), std::string::npos) << scalar;  // after the 8-byte pointer
  LaunchSignature block = cap;
  block.block = {128, 1, 1};
  EXPECT_EQ(signature_difference(block, cap), "block (128,1,1) vs captured (256,1,1)");
  LaunchSignature smem = cap;
  smem.smem = 4096;
  EXPECT_EQ(signature_difference(smem, cap), "dynamic shared memory 4096 vs captured 0 bytes");
  LaunchSignature shorter = cap;
  shorter.args.pop_back();
  EXPECT_EQ(signature_difference(shorter, cap), "15 argument bytes vs captured 16");
}

TEST(CudaGraphRecorder, EagerLaunchesRunAndRecordNothing) {
  GraphRecorder r;
  EXPECT_EQ(r.mode(), GraphMode::kEager);
  EXPECT_TRUE(r.on_launch(launch("rmsnorm", kernel_a, {1, 1, 1}, 1)));
  EXPECT_TRUE(r.on_launch(launch("rmsnorm", kernel_a, {2, 1, 1}, 1)));
  EXPECT_EQ(r.launches_seen(), 0u);
  EXPECT_THROW(r.next_upload(16, "x", true), std::logic_error);
  EXPECT_NO_THROW(r.end());
}

TEST(CudaGraphRecorder, FillComparesEachLaunchWithTheCapturedOneAndLaunchesNothing) {
  GraphRecorder r;
  GraphRecording rec;
  HeapSlots heap;
  int x = 0;
  r.begin_capture(rec, heap.allocator());
  EXPECT_EQ(r.mode(), GraphMode::kCapture);
  EXPECT_TRUE(r.on_launch(launch("embedding", kernel_a, {1, 1, 1}, 4, &x)));
  EXPECT_TRUE(r.on_launch(launch("attention items", kernel_b, {9, 2, 1}, 4)));
  r.end();
  EXPECT_EQ(r.mode(), GraphMode::kEager);
  ASSERT_EQ(rec.launches.size(), 2u);

  r.begin_fill(rec);
  EXPECT_FALSE(r.on_launch(launch("embedding", kernel_a, {1, 1, 1}, 4, &x)));
  EXPECT_FALSE(r.on_launch(launch("attention items", kernel_b, {9, 2, 1}, 4)));
  EXPECT_NO_THROW(r.end());

  r.begin_fill(rec);
  EXPECT_FALSE(r.on_launch(launch("embedding", kernel_a, {1, 1, 1}, 4, &x)));
  try {
    r.on_launch(launch("attention items", kernel_b, {12, 2, 1}, 4));
    FAIL() << "a different grid must throw";
  } catch (const GraphMismatch& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("attention items: grid (12,2,1) vs captured (9,2,1)"), std::string::npos) << m;
    EXPECT_NE(m.find("launch 1"), std::string::npos) << m;
  }
  r.abort();
  EXPECT_EQ(r.mode(), GraphMode::kEager);

  // A pointer argument that changed (a per-step value baked into a launch).
  int y = 0;
  r.begin_fill(rec);
  EXPECT_THROW(r.on_launch(launch("embedding", kernel_a, {1, 1, 1}, 4, &y)), GraphMismatch);
  r.abort();
}

TEST(CudaGraphRecorder, FillWithMoreOrFewerLaunchesThrows) {
  GraphRecorder r;
  GraphRecording rec;
  HeapSlots heap;
  r.begin_capture(rec, heap.allocator());
  r.on_launch(launch("rmsnorm", kernel_a, {1, 1, 1}, 1));
  r.end();

  r.begin_fill(rec);
  r.on_launch(launch("rmsnorm", kernel_a, {1, 1, 1}, 1));
  try {
    r.on_launch(launch("moe", kernel_a, {1, 1, 1}, 1));
    FAIL() << "one launch more than the capture must throw";
  } catch (const GraphMismatch& e) {
    EXPECT_NE(std::string(e.what()).find("moe: one launch more than the capture's 1"), std::string::npos) << e.what();
  }
  r.abort();

  r.begin_fill(rec);
  EXPECT_THROW(r.end(), GraphMismatch);  // none of the captured launch
  EXPECT_EQ(r.mode(), GraphMode::kEager);  // usable again after the error
}

TEST(CudaGraphRecorder, UploadsGetOneSlotEachByOrdinal) {
  GraphRecorder r;
  GraphRecording rec;
  HeapSlots heap;
  r.begin_capture(rec, heap.allocator());
  UploadSlot& a = r.next_upload(64, "kv_write", true);
  void* a_host = a.host;
  void* a_dev = a.device;
  UploadSlot& b = r.next_upload(8, "upload", false);
  EXPECT_EQ(b.device, nullptr);  // Backend::upload copies into the caller's buffer
  EXPECT_NE(b.host, nullptr);
  r.end();
  ASSERT_EQ(rec.uploads.size(), 2u);
  EXPECT_NE(a_host, rec.uploads[1].host);

  r.begin_fill(rec);
  UploadSlot& fa = r.next_upload(64, "kv_write", true);
  EXPECT_EQ(fa.host, a_host);  // the same slot as the capture's, every replay
  EXPECT_EQ(fa.device, a_dev);
  EXPECT_EQ(r.next_upload(8, "upload", false).host, rec.uploads[1].host);
  EXPECT_NO_THROW(r.end());
}

TEST(CudaGraphRecorder, UploadSizeMismatchNamesTheOp) {
  GraphRecorder r;
  GraphRecording rec;
  HeapSlots heap;
  r.begin_capture(rec, heap.allocator());
  r.next_upload(64, "attention", true);
  r.end();

  r.begin_fill(rec);
  try {
    r.next_upload(128, "attention", true);
    FAIL() << "a different size must throw";
  } catch (const GraphMismatch& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("attention: upload 0 of 128 bytes vs captured attention of 64 bytes"), std::string::npos) << m;
  }
  r.abort();

  // One upload more than the capture's (ordinal overflow), and one fewer.
  r.begin_fill(rec);
  r.next_upload(64, "attention", true);
  EXPECT_THROW(r.next_upload(64, "attention", true), GraphMismatch);
  r.abort();
  r.begin_fill(rec);
  EXPECT_THROW(r.end(), GraphMismatch);
}

TEST(CudaGraphRecorder, ModesDoNotNest) {
  GraphRecorder r;
  GraphRecording rec, other;
  HeapSlots heap;
  r.begin_capture(rec, heap.allocator());
  EXPECT_THROW(r.begin_capture(other, heap.allocator()), std::logic_error);
  EXPECT_THROW(r.begin_fill(other), std::logic_error);
  r.end();
  r.begin_fill(rec);
  EXPECT_THROW(r.begin_capture(other, heap.allocator()), std::logic_error);
  r.abort();
}

TEST(CudaGraphRecorder, RecaptureStartsEmpty) {
  GraphRecorder r;
  GraphRecording rec;
  HeapSlots heap;
  r.begin_capture(rec, heap.allocator());
  r.on_launch(launch("rmsnorm", kernel_a, {1, 1, 1}, 1));
  r.next_upload(4, "x", true);
  r.end();
  r.begin_capture(rec, heap.allocator());
  r.end();
  EXPECT_TRUE(rec.launches.empty());
  EXPECT_TRUE(rec.uploads.empty());
}

}  // namespace
}  // namespace fp4serve::kernels::cuda
#endif
