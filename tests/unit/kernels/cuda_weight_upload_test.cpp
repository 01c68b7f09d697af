// The host half of the CUDA weight loader (src/kernels/cuda/weight_upload.h), checked on the CPU:
// the packers writing ranges of a weight into caller memory (every format, any split, byte-equal to
// the packer the kernels were verified with), the staging planner's choice of buffers and pieces,
// and the progress meter on a fake clock. The loader's CUDA calls themselves (pinned buffers, the
// copy stream, events, the fence) run only on a GPU: backend_ops_cuda_tests.
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cuda/linear_pack.h"
#include "kernels/cuda/load_progress.h"
#include "kernels/cuda/staging_loader.h"
#include "kernels/cuda/staging_plan.h"

namespace fp4serve::kernels::cuda {
namespace {

using test::WeightKind;

uint64_t fnv1a(const void* p, std::size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

struct Golden {
  WeightKind kind;
  int64_t n, k;
  uint64_t hash;  // FNV-1a of words, unit scales, fp4 scales
};

// The packed bytes of the packer that built whole host vectors (before packing went into staging
// buffers in pieces), for make_random_weight(kind, n, k, 31): the kernels' layout is unchanged.
const Golden kGolden[] = {
    {WeightKind::kBf16, 13, 100, 0xeddb1751a4e44331ull},
    {WeightKind::kBf16, 37, 300, 0xde6bca029910e223ull},
    {WeightKind::kBf16, 130, 1040, 0xa46463e90bf510e0ull},
    {WeightKind::kFp8Tensor, 13, 100, 0xc56b287f6319db9eull},
    {WeightKind::kFp8Tensor, 37, 300, 0x4f92c4bf600fdd2eull},
    {WeightKind::kFp8Tensor, 130, 1040, 0xcd6417f8152c7b1bull},
    {WeightKind::kFp8BlockF32, 13, 100, 0x7ba1f36ded287b2dull},
    {WeightKind::kFp8BlockF32, 37, 300, 0x7530da3bfd3b5553ull},
    {WeightKind::kFp8BlockF32, 130, 1040, 0x959a922af5625d8bull},
    {WeightKind::kFp8BlockBf16, 13, 100, 0x3ed45101276b836dull},
    {WeightKind::kFp8BlockBf16, 37, 300, 0xfd995efaca1e5da0ull},
    {WeightKind::kFp8BlockBf16, 130, 1040, 0xae67333509d7553full},
    {WeightKind::kNvfp4, 13, 272, 0xb20144e7035079a6ull},
    {WeightKind::kNvfp4, 37, 80, 0xe31cf4d62f719043ull},
    {WeightKind::kNvfp4, 130, 1040, 0x26aba03b595541f3ull},
    {WeightKind::kInt4Gptq, 13, 384, 0x16a9b6ae4ed272a9ull},
    {WeightKind::kInt4Gptq, 37, 128, 0xe9f3252c985fef00ull},
    {WeightKind::kInt4Gptq, 130, 1024, 0x6c0fd106eca657d2ull},
    {WeightKind::kInt4Packed, 13, 384, 0x16a9b6ae4ed272a9ull},
    {WeightKind::kInt4Packed, 37, 128, 0xe9f3252c985fef00ull},
    {WeightKind::kInt4Packed, 130, 1024, 0x6c0fd106eca657d2ull},
};

std::string name_of(const Golden& g) {
  return std::string(test::kind_name(g.kind)) + " [" + std::to_string(g.n) + ", " + std::to_string(g.k) + "]";
}

TEST(CudaWeightUpload, WholePackMatchesThePackedBytesTheKernelsWereVerifiedWith) {
  for (const Golden& g : kGolden) {
    const test::RandomWeight r = test::make_random_weight(g.kind, g.n, g.k, 31);
    const PackedLinear p = pack_linear(r.view);
    uint64_t h = fnv1a(p.words.data(), p.words.size() * 4);
    h = fnv1a(p.unit_scales.data(), p.unit_scales.size() * 4, h);
    h = fnv1a(p.fp4_scales.data(), p.fp4_scales.size(), h);
    EXPECT_EQ(h, g.hash) << name_of(g);
    EXPECT_EQ(p.words.size() * 4, p.word_bytes()) << name_of(g);
    EXPECT_EQ(p.unit_scales.size() * 4, p.unit_scale_bytes()) << name_of(g);
    EXPECT_EQ(p.fp4_scales.size(), p.fp4_scale_bytes()) << name_of(g);
  }
}

// Packs one array in the ranges `cuts` gives ([0, c1), [c1, c2), ... , [cn, rows)) into caller
// memory surrounded by guard bytes, as the loader does into its staging buffers; returns the
// concatenation and fails if a range writes outside its own bytes.
template <class Pack>
std::vector<uint8_t> pack_in_ranges(int64_t rows, std::size_t row_bytes, const std::vector<int64_t>& cuts, Pack pack,
                                    const std::string& what) {
  std::vector<uint8_t> all;
  constexpr std::size_t kGuard = 64;
  int64_t begin = 0;
  std::vector<int64_t> ends = cuts;
  ends.push_back(rows);
  for (int64_t end : ends) {
    end = std::min(end, rows);
    if (end < begin) continue;
    const std::size_t bytes = static_cast<std::size_t>(end - begin) * row_bytes;
    std::vector<uint8_t> mem(bytes + 2 * kGuard, 0xA5);
    pack(begin, end, mem.data() + kGuard);
    for (std::size_t i = 0; i < kGuard; ++i) {
      EXPECT_EQ(mem[i], 0xA5) << what << ": range [" << begin << ", " << end << ") wrote before its memory";
      EXPECT_EQ(mem[kGuard + bytes + i], 0xA5) << what << ": range [" << begin << ", " << end << ") wrote past its memory";
    }
    all.insert(all.end(), mem.begin() + kGuard, mem.begin() + static_cast<std::ptrdiff_t>(kGuard + bytes));
    begin = end;
  }
  return all;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Any split of the column tiles (and of the scale units) packs the same bytes as the whole weight:
// one tile at a time, uneven pieces, a single piece.
TEST(CudaWeightUpload, PackingInRangesEqualsThePackedWeightForEveryFormat) {
  for (const Golden& g : kGolden) {
    const test::RandomWeight r = test::make_random_weight(g.kind, g.n, g.k, 31);
    const PackedLinear whole = pack_linear(r.view);
    const PackedShape s = packed_shape(r.view);
    ASSERT_EQ(s.n_tiles, whole.n_tiles);
    std::vector<std::vector<int64_t>> tile_cuts = {{}, {1}, {2, 3, 7}};
    std::vector<int64_t> each;
    for (int64_t t = 1; t < s.n_tiles; ++t) each.push_back(t);
    tile_cuts.push_back(each);
    for (const auto& cuts : tile_cuts) {
      const std::string what = name_of(g) + " in " + std::to_string(cuts.size() + 1) + " tile ranges";
      EXPECT_EQ(pack_in_ranges(s.n_tiles, s.word_bytes_per_tile(), cuts,
                               [&](int64_t a, int64_t b, void* d) { pack_words_into(s, r.view, a, b, d); }, what + " (words)"),
                bytes_of(whole.words))
          << what;
      EXPECT_EQ(pack_in_ranges(s.n_tiles, s.fp4_scale_bytes_per_tile(), cuts,
                               [&](int64_t a, int64_t b, void* d) { pack_fp4_scales_into(s, r.view, a, b, d); },
                               what + " (block scales)"),
                bytes_of(whole.fp4_scales))
          << what;
    }
    for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{}, std::vector<int64_t>{1}, std::vector<int64_t>{1, 2, 3, 5}}) {
      const std::string what = name_of(g) + " in " + std::to_string(cuts.size() + 1) + " unit ranges";
      EXPECT_EQ(pack_in_ranges(s.units(), s.unit_scale_bytes_per_unit(), cuts,
                               [&](int64_t a, int64_t b, void* d) { pack_unit_scales_into(s, r.view, a, b, d); }, what),
                bytes_of(whole.unit_scales))
          << what;
    }
  }
}

TEST(CudaWeightUpload, PackRangesOutsideTheWeightAreRejected) {
  const test::RandomWeight r = test::make_random_weight(WeightKind::kNvfp4, 37, 272, 3);
  const PackedShape s = packed_shape(r.view);
  std::vector<uint8_t> mem(s.word_bytes() + s.fp4_scale_bytes());
  EXPECT_THROW(pack_words_into(s, r.view, 0, s.n_tiles + 1, mem.data()), std::invalid_argument);
  EXPECT_THROW(pack_words_into(s, r.view, 2, 1, mem.data()), std::invalid_argument);
  EXPECT_THROW(pack_fp4_scales_into(s, r.view, -1, 1, mem.data()), std::invalid_argument);
  EXPECT_THROW(pack_unit_scales_into(s, r.view, 0, 1, mem.data()), std::invalid_argument);  // nvfp4: no units
  EXPECT_NO_THROW(pack_words_into(s, r.view, 3, 3, mem.data()));  // an empty range writes nothing
}

// ---- the staging planner ---------------------------------------------------------------------

constexpr std::size_t kBuf = 4096, kAlign = 256;

TEST(CudaStagingPlan, SmallArraysShareABufferAtAlignedOffsetsThenTheRingTurns) {
  StagingPlanner plan(kBuf, 2, kAlign);
  auto a = plan.place(1, 1000);  // buffer 0 at 0
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0], (StagingPiece{0, 0, 0, 1, 1000, false, -1, false}));
  auto b = plan.place(10, 100);  // buffer 0 at 1024 (aligned), 1000 bytes
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0], (StagingPiece{0, 1024, 0, 10, 1000, false, -1, false}));
  auto c = plan.place(1, 2048);  // buffer 0 at 2048: exactly fills it
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], (StagingPiece{0, 2048, 0, 1, 2048, false, -1, false}));
  auto d = plan.place(1, 16);  // no room: buffer 1, leaving 0
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], (StagingPiece{1, 0, 0, 1, 16, true, 0, false}));
  auto e = plan.place(1, 4000);  // 256 used in buffer 1: back to 0, leaving 1
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], (StagingPiece{0, 0, 0, 1, 4000, true, 1, false}));
  EXPECT_EQ(plan.current(), 0);
  EXPECT_TRUE(plan.place(0, 100).empty());
  EXPECT_TRUE(plan.place(5, 0).empty());
  EXPECT_EQ(plan.current(), 0);
  EXPECT_EQ(plan.offset(), 4096u);
}

// A weight larger than a buffer: pieces of whole rows, the first in what is left of the current
// buffer, then whole buffers alternately, the rows in order.
TEST(CudaStagingPlan, ABigArrayIsCutIntoPiecesOfWholeRows) {
  StagingPlanner plan(kBuf, 2, kAlign);
  plan.place(1, 1000);  // buffer 0 holds 1024
  const auto pieces = plan.place(10, 1000);  // 10000 bytes; rows of 1000
  const std::vector<StagingPiece> want = {
      {0, 1024, 0, 3, 3000, false, -1, false},  // 3072 left: 3 rows
      {1, 0, 3, 7, 4000, true, 0, false},       // a whole buffer: 4 rows
      {0, 0, 7, 10, 3000, true, 1, false},
  };
  EXPECT_EQ(pieces, want);
}

TEST(CudaStagingPlan, ARowLargerThanABufferGrowsTheBuffers) {
  StagingPlanner plan(kBuf, 2, kAlign);
  plan.place(1, 100);
  plan.place(1, 4000);  // buffer 1
  const auto pieces = plan.place(3, 5000);
  EXPECT_EQ(plan.buffer_bytes(), 5120u);  // the row, aligned
  const std::vector<StagingPiece> want = {
      {0, 0, 0, 1, 5000, false, -1, true},  // every buffer drained and reallocated: buffer 0
      {1, 0, 1, 2, 5000, true, 0, false},
      {0, 0, 2, 3, 5000, true, 1, false},
  };
  EXPECT_EQ(pieces, want);
  // The larger buffers stay.
  const auto next = plan.place(1, 100);
  EXPECT_EQ(next[0], (StagingPiece{1, 0, 0, 1, 100, true, 0, false}));
}

TEST(CudaStagingPlan, RestartBeginsAgainAtBufferZero) {
  StagingPlanner plan(kBuf, 2, kAlign);
  plan.place(3, 3000);
  plan.restart();
  const auto p = plan.place(1, 10);
  EXPECT_EQ(p[0], (StagingPiece{0, 0, 0, 1, 10, false, -1, false}));
  EXPECT_THROW(StagingPlanner(0, 2), std::invalid_argument);
  EXPECT_THROW(StagingPlanner(kBuf, 0), std::invalid_argument);
}

// The loader's rules over a random load of many arrays (a model's experts, scales, tensors): each
// piece lies inside its buffer at an aligned offset; it never overlaps a piece written to the same
// buffer since the loader last waited for that buffer's copies (entering it); the loader never
// enters the buffer it is leaving (with two buffers); and the pieces of an array are its rows, in
// order, each once.
TEST(CudaStagingPlan, PiecesNeverOverwriteBytesWhoseCopyMayBePending) {
  for (int buffers : {1, 2, 3}) {
    StagingPlanner plan(kBuf, buffers, kAlign);
    std::mt19937 rng(static_cast<unsigned>(buffers));
    std::vector<std::vector<std::pair<std::size_t, std::size_t>>> live(static_cast<std::size_t>(buffers));
    int current = 0;
    for (int array = 0; array < 2000; ++array) {
      const int64_t rows = std::uniform_int_distribution<int64_t>(0, 40)(rng);
      const std::size_t row_bytes = std::uniform_int_distribution<std::size_t>(1, array % 97 == 0 ? 6000 : 1500)(rng);
      int64_t next_row = 0;
      for (const StagingPiece& p : plan.place(rows, row_bytes)) {
        if (p.grows) {
          for (auto& l : live) l.clear();  // the loader drained every copy
          current = 0;
        }
        if (p.enters_buffer) {
          EXPECT_EQ(p.left_buffer, current);
          if (buffers == 2) EXPECT_NE(p.buffer, p.left_buffer);
          live[static_cast<std::size_t>(p.buffer)].clear();  // waited for its copies
        } else {
          EXPECT_EQ(p.buffer, current) << "a piece in another buffer without entering it";
        }
        current = p.buffer;
        EXPECT_EQ(p.offset % kAlign, 0u);
        EXPECT_LE(p.offset + p.bytes, plan.buffer_bytes());
        EXPECT_EQ(p.bytes, static_cast<std::size_t>(p.row1 - p.row0) * row_bytes);
        EXPECT_GT(p.row1, p.row0);
        EXPECT_EQ(p.row0, next_row);
        next_row = p.row1;
        for (auto [o, n] : live[static_cast<std::size_t>(p.buffer)])
          EXPECT_TRUE(p.offset >= o + n || p.offset + p.bytes <= o) << "array " << array << " overwrites a pending copy";
        live[static_cast<std::size_t>(p.buffer)].push_back({p.offset, p.bytes});
      }
      EXPECT_EQ(next_row, std::max<int64_t>(rows, 0)) << "array " << array;
    }
  }
}

// ---- the progress meter ----------------------------------------------------------------------

struct FakeClock {
  double now = 100.0;
  LoadProgress::Clock clock() {
    return [this] { return now; };
  }
};

TEST(CudaLoadProgress, AtMostOneLinePerIntervalWithBytesAndRate) {
  FakeClock t;
  LoadProgress p(t.clock(), 1.0);
  p.expect_total(22'100'000'000);
  p.start();
  t.now += 0.5;
  EXPECT_FALSE(p.add(4'000'000'000));  // half a second in: no line yet
  t.now += 0.75;
  auto line = p.add(1'000'000'000);  // 1.25 s: 5 GB
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "loading weights to cuda: 5.0 / 22.1 GB, 4.0 GB/s");
  t.now += 0.9;
  EXPECT_FALSE(p.add(1'000'000'000));  // 0.9 s after the last line
  t.now += 0.2;
  line = p.add(1'000'000'000);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "loading weights to cuda: 7.0 / 22.1 GB, 3.0 GB/s");  // 7 GB in 2.35 s
  EXPECT_EQ(p.bytes(), 7'000'000'000u);
}

TEST(CudaLoadProgress, SummaryCountsOnlyTheLoadingStretches) {
  FakeClock t;
  LoadProgress p(t.clock(), 1.0);
  EXPECT_EQ(p.gb_per_s(), 0.0);
  EXPECT_FALSE(p.add(2'000'000'000));  // add() starts the clock
  t.now += 2.0;
  p.stop();
  EXPECT_FALSE(p.loading());
  t.now += 50.0;  // idle (the model serving, say): not load time
  p.start();
  t.now += 0.5;
  EXPECT_FALSE(p.add(500'000'000));  // a new stretch's interval starts with it
  EXPECT_DOUBLE_EQ(p.seconds(), 2.5);  // the running stretch counts
  p.stop();
  t.now += 10.0;
  EXPECT_DOUBLE_EQ(p.seconds(), 2.5);
  EXPECT_EQ(p.summary(), "uploaded 2.5 GB in 2.5 s (1.0 GB/s)");
  // Without an expected total the line shows the bytes alone.
  EXPECT_EQ(p.line(), "loading weights to cuda: 2.5 GB, 1.0 GB/s");
  p.stop();  // idempotent
  EXPECT_DOUBLE_EQ(p.seconds(), 2.5);
}


// ---- the loader's loop against a simulated copy engine -----------------------------------------

// The laziest copy engine the events allow: a copy reads its staged bytes only when the host waits
// for an event recorded after it, or drains. A loader that rewrote a staging buffer before that
// would leave wrong bytes on the "device".
class LazyCopyEngine final : public StagingTarget {
 public:
  ~LazyCopyEngine() override { EXPECT_EQ(live_, 0) << "staging buffers never released"; }
  char* allocate(std::size_t bytes) override {
    ++live_;
    ++allocations;
    buffers_.push_back(std::make_unique<char[]>(bytes));
    std::memset(buffers_.back().get(), 0x5A, bytes);
    return buffers_.back().get();
  }
  void release(char* buffer) override {
    EXPECT_EQ(done_, queue_.size()) << "a staging buffer released while its copies may be pending";
    for (auto& b : buffers_)
      if (b.get() == buffer) {
        std::memset(b.get(), 0xEE, 1);  // a copy still reading it would see this
        --live_;
        return;
      }
    ADD_FAILURE() << "release of a buffer never allocated";
  }
  void copy(void* dst, const char* staged, std::size_t bytes) override { queue_.push_back({dst, staged, bytes}); }
  void record(int buffer) override {
    if (recorded_.size() <= static_cast<std::size_t>(buffer)) recorded_.resize(static_cast<std::size_t>(buffer) + 1, 0);
    recorded_[static_cast<std::size_t>(buffer)] = queue_.size();
  }
  void wait(int buffer) override {
    ASSERT_LT(static_cast<std::size_t>(buffer), recorded_.size()) << "a wait on a buffer never recorded";
    ++waits;
    run_until(recorded_[static_cast<std::size_t>(buffer)]);
  }
  void drain() override { run_until(queue_.size()); }

  int waits = 0, allocations = 0;

 private:
  struct Copy {
    void* dst;
    const char* src;
    std::size_t bytes;
  };
  void run_until(std::size_t n) {
    for (; done_ < n; ++done_) std::memcpy(queue_[done_].dst, queue_[done_].src, queue_[done_].bytes);
  }
  std::vector<std::unique_ptr<char[]>> buffers_;
  std::vector<Copy> queue_;
  std::vector<std::size_t> recorded_;
  std::size_t done_ = 0;
  int live_ = 0;
};

// What prepare_linear does, on host memory standing in for the device: the three arrays of every
// golden weight through the loop, then a plain tensor larger than a buffer; after finish() every
// array equals the weight packed whole.
TEST(CudaStagingLoader, EveryWeightArrivesIntactThroughLazyCopies) {
  for (std::size_t buffer_bytes : {std::size_t{16} << 10, std::size_t{64} << 10})
    for (int buffers : {1, 2, 3}) {
      const std::string setup = std::to_string(buffers) + " buffers of " + std::to_string(buffer_bytes);
      LazyCopyEngine engine;
      StagingLoader loader(engine, buffer_bytes, buffers);
      struct Loaded {
        PackedLinear want;
        std::vector<uint8_t> words, units, fp4;
      };
      std::vector<std::unique_ptr<Loaded>> loaded;
      std::vector<test::RandomWeight> sources;
      std::size_t total = 0;
      for (const Golden& g : kGolden) {
        sources.push_back(test::make_random_weight(g.kind, g.n, g.k, 31));
        const WeightView& w = sources.back().view;
        const PackedShape s = packed_shape(w);
        auto l = std::make_unique<Loaded>();
        l->want = pack_linear(w);
        l->words.assign(s.word_bytes(), 0);
        l->units.assign(s.unit_scale_bytes(), 0);
        l->fp4.assign(s.fp4_scale_bytes(), 0);
        loader.upload(l->words.data(), s.n_tiles, s.word_bytes_per_tile(),
                      [&](int64_t a, int64_t b, void* d) { pack_words_into(s, w, a, b, d); }, "words");
        loader.upload(l->units.data(), s.units(), s.unit_scale_bytes_per_unit(),
                      [&](int64_t a, int64_t b, void* d) { pack_unit_scales_into(s, w, a, b, d); }, "unit scales");
        loader.upload(l->fp4.data(), s.n_tiles, s.fp4_scale_bytes_per_tile(),
                      [&](int64_t a, int64_t b, void* d) { pack_fp4_scales_into(s, w, a, b, d); }, "block scales");
        total += s.word_bytes() + s.unit_scale_bytes() + s.fp4_scale_bytes();
        loaded.push_back(std::move(l));
      }
      std::vector<uint8_t> tensor(150'001), tensor_dev(tensor.size(), 0);
      for (std::size_t i = 0; i < tensor.size(); ++i) tensor[i] = static_cast<uint8_t>(i * 131 + 7);
      loader.upload_bytes(tensor_dev.data(), tensor.data(), tensor.size(), "tensor");
      total += tensor.size();
      EXPECT_TRUE(loader.take_unfenced());
      EXPECT_FALSE(loader.take_unfenced());
      loader.finish();
      EXPECT_EQ(loader.progress().bytes(), total) << setup;
      EXPECT_FALSE(loader.progress().loading());
      for (std::size_t i = 0; i < loaded.size(); ++i) {
        const Loaded& l = *loaded[i];
        EXPECT_EQ(l.words, bytes_of(l.want.words)) << setup << ", " << name_of(kGolden[i]);
        EXPECT_EQ(l.units, bytes_of(l.want.unit_scales)) << setup << ", " << name_of(kGolden[i]);
        EXPECT_EQ(l.fp4, bytes_of(l.want.fp4_scales)) << setup << ", " << name_of(kGolden[i]);
      }
      EXPECT_EQ(tensor_dev, tensor) << setup;
      EXPECT_GT(engine.waits, 0) << setup << ": the buffers were never reused";
      // Loading again after finish() allocates the buffers again and still arrives.
      std::vector<uint8_t> again(1000, 0);
      loader.upload_bytes(again.data(), tensor.data(), again.size(), "again");
      loader.finish();
      EXPECT_TRUE(std::equal(again.begin(), again.end(), tensor.begin())) << setup;
    }
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
