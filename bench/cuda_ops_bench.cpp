// The CUDA op benchmark (issue 15): every op of the seam that a decode or prefill step spends its time
// in, through the Backend interface (kernels::cuda::CudaBackend), at Qwen3.6-35B-A3B's real shapes
// (hidden 2048; 256 experts top-8, intermediate 512, shared expert 512; 16 q / 2 kv heads of 256; GDN
// 16 k / 32 v heads of 128; vocab 248,320), M (tokens or sequences) in {1, 8, 32, 64, 256}.
//
// Per case: the time per call (CUDA events around back-to-back calls on the backend's stream, the
// median of several batches after a warm-up), the bytes the op must move (weights it reads, each
// activation read once, each output written once) over that time in GB/s and as a fraction of the
// device's measured copy bandwidth (cudaMemcpy device to device of 1 GiB, bytes read + written), and
// the arithmetic in TFLOP/s. Weights and caches rotate through more memory than the L2 holds, so that
// they come from HBM as in a real step. An op that throws (not implemented yet) is reported as such
// and the benchmark goes on.
//
//   cuda_ops_bench OUT_DIR [--budget-s S] [--filter SUBSTRING] [--cpu-check]
// (--cpu-check: every case at small sizes through the CPU backend, once each: a check of the benchmark's
// own setup where there is no GPU; exit 1 when a case is not ok) writes OUT_DIR/cuda_ops_bench.md (a table) and OUT_DIR/cuda_ops_bench.json, rewritten after every
// case (a run stopped from outside keeps what it measured). Exit 0 when it ran (whatever the ops did),
// 2 when this machine has no CUDA device, 1 on a usage error. Run by scripts/gpu-check.sh.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_ops_bench_util.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_info.h"
#include "tensor/float_formats.h"

namespace {

using namespace fp4serve;
using namespace fp4serve::kernels;
using namespace fp4serve::cuda_ops_bench;

// ---- the model's shapes (../shared/spec/model-arch.md) --------------------------------------------
constexpr int64_t kHidden = 2048, kExperts = 256, kTopK = 8, kMoeInter = 512, kSharedInter = 512;
constexpr int64_t kHq = 16, kHkv = 2, kHeadDim = 256;
constexpr int kGdnHk = 16, kGdnHv = 32, kGdnDk = 128, kGdnDv = 128, kGdnConv = 4;
constexpr int64_t kVocab = 248320, kValidVocab = 248077;
constexpr int64_t kKvBlock = 16;

// The sizes of a run: the model's (the default), or with --cpu-check small ones with which every case's
// setup and calls run through the CPU backend in seconds: a check of the benchmark itself where no GPU is.
struct Sizes {
  std::vector<int64_t> ms{1, 8, 32, 64, 256};  // tokens (linears, MoE, norms), sequences (decode), rows (sampling)
  std::size_t rotate_bytes = std::size_t{256} << 20;  // weights and states rotate well past the 60 MB L2
  int moe_layers = 4;
  int64_t ctx = 32768;                                // attention decode context
  std::vector<int64_t> prefill{256, 1024, 4096};      // prefill lengths (attention, GDN)
  int64_t gdn_slots = 512;
  int64_t norm_inputs = 64;                           // distinct rmsnorm inputs rotated
  bool lm_head = true;
  int64_t max_m() const { return ms.back(); }
  int64_t max_t() const { return prefill.back(); }
};
Sizes sz;

Sizes cpu_check_sizes() {
  Sizes s;
  s.ms = {1, 8};
  s.rotate_bytes = 0;
  s.moe_layers = 1;
  s.ctx = 512;
  s.prefill = {64};
  s.gdn_slots = 16;
  s.norm_inputs = 2;
  s.lm_head = false;
  return s;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// ---- timing ----------------------------------------------------------------------------------------
class Bench {
 public:
  // `stream`: the CUDA backend's, timed with events; nullptr: a --cpu-check run (each case once, wall clock).
  Bench(Backend& b, cudaStream_t stream, Report& report, double budget_s, std::string filter)
      : b_(b), stream_(stream), report_(report), budget_s_(budget_s), filter_(std::move(filter)),
        t0_(std::chrono::steady_clock::now()) {
    if (stream_ != nullptr) {
      check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
      check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
    }
  }
  ~Bench() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }
  bool wanted(const std::string& op) const { return filter_.empty() || op.find(filter_) != std::string::npos; }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  // Times `call(i)` (i counts calls, for rotation) and records the case. Never throws.
  void run(Result r, const std::function<void(int64_t)>& call) {
    if (elapsed() > budget_s_) {
      r.status = "skipped: time budget";
    } else {
      try {
        r.us = time_us(call);
      } catch (const std::exception& e) {
        r.status = classify(e.what());
      }
    }
    std::printf("  %-22s %-34s M=%-4lld %-6s %10.1f us  %s\n", r.op.c_str(), r.shape.c_str(),
                static_cast<long long>(r.m), r.format.c_str(), r.us, r.status.c_str());
    std::fflush(stdout);
    report_.results.push_back(std::move(r));
    report_.write();
  }
  // A case whose setup failed (e.g. prepare_linear threw).
  void failed(Result r, const std::exception& e) {
    r.status = classify(e.what());
    std::printf("  %-22s %-34s M=%-4lld %-6s %s\n", r.op.c_str(), r.shape.c_str(), static_cast<long long>(r.m),
                r.format.c_str(), r.status.c_str());
    report_.results.push_back(std::move(r));
    report_.write();
  }

  static std::string classify(const std::string& what) {
    std::string w = what.substr(0, 200);
    const bool missing = w.find("not implemented") != std::string::npos || w.find("placeholder") != std::string::npos;
    return (missing ? "not implemented: " : "error: ") + w;
  }

 private:
  double time_us(const std::function<void(int64_t)>& call) {
    cudaStream_t s = stream_;
    int64_t i = 0;
    call(i++);  // warm-up: first-use allocations, module load, scratch growth
    b_.synchronize();
    if (s == nullptr) {  // --cpu-check: one more call on the wall clock
      const auto t = std::chrono::steady_clock::now();
      call(i++);
      b_.synchronize();
      return 1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    }
    // One call's rough time, then batches of ~10 ms.
    check_cuda(cudaEventRecord(start_, s), "cudaEventRecord");
    call(i++);
    check_cuda(cudaEventRecord(stop_, s), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    const int64_t per_batch = std::clamp<int64_t>(static_cast<int64_t>(10.0 / std::max(ms, 1e-3f)), 1, 200);
    std::vector<double> batches;
    for (int rep = 0; rep < 5; ++rep) {
      check_cuda(cudaEventRecord(start_, s), "cudaEventRecord");
      for (int64_t j = 0; j < per_batch; ++j) call(i++);
      check_cuda(cudaEventRecord(stop_, s), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
      check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
      batches.push_back(1e3 * ms / static_cast<double>(per_batch));
    }
    b_.synchronize();
    std::sort(batches.begin(), batches.end());
    return batches[batches.size() / 2];
  }

  Backend& b_;
  cudaStream_t stream_ = nullptr;
  Report& report_;
  double budget_s_;
  std::string filter_;
  std::chrono::steady_clock::time_point t0_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

double copy_bandwidth_gbs(cuda::CudaBackend& b) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceBuffer src = b.allocate(bytes, "copy test source"), dst = b.allocate(bytes, "copy test destination");
  cudaStream_t s = b.context().stream;
  cudaEvent_t e0, e1;
  check_cuda(cudaEventCreate(&e0), "cudaEventCreate");
  check_cuda(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < 12; ++i) {
    check_cuda(cudaEventRecord(e0, s), "cudaEventRecord");
    check_cuda(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    check_cuda(cudaEventRecord(e1, s), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    if (i >= 2) t.push_back(ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(t.begin(), t.end());
  return 2.0 * static_cast<double>(bytes) / (t[t.size() / 2] * 1e6);  // read + write, GB/s
}

// ---- the cases ---------------------------------------------------------------------------------------

std::string dims(int64_t n, int64_t k) { return std::to_string(n) + "x" + std::to_string(k); }

// y[M, N] f32 = x[M, K] bf16 @ W^T, the weight rotated over copies spanning sz.rotate_bytes.
void bench_linears(Backend& b, Bench& bench) {
  struct Shape {
    const char* what;
    int64_t n, k;
    std::vector<WeightLayout> formats;
  };
  const Shape shapes[] = {
      {"gdn in_proj_qkvz", 12288, kHidden, {WeightLayout::kNvfp4, WeightLayout::kFp8Tensor, WeightLayout::kBf16}},
      {"attn q_proj+gate", 2 * kHq * kHeadDim, kHidden, {WeightLayout::kNvfp4}},
      {"gdn out_proj", kHidden, 4096, {WeightLayout::kNvfp4, WeightLayout::kFp8Tensor, WeightLayout::kBf16}},
      {"lm_head", kVocab, kHidden, {WeightLayout::kBf16}},
  };
  const int64_t max_m = sz.max_m();
  Tensor x = upload(b, DType::kBF16, {max_m, 4096}, random_bf16(static_cast<std::size_t>(max_m * 4096), 7), "x");
  for (const Shape& s : shapes)
    for (WeightLayout f : s.formats) {
      const std::string op = std::string("linear ") + s.what;
      if (!bench.wanted(op) || (s.n == kVocab && !sz.lm_head)) continue;
      Result base{op, dims(s.n, s.k), format_name(f), 0, 0, 0, 0, "ok"};
      std::vector<LinearHandle> handles;
      Tensor out;
      std::size_t wbytes = 0;
      HostWeight w;  // outlives the handles: a backend may keep viewing it (the CPU backend's unpacked tiers do)
      try {
        w = host_weight(f, s.n, s.k, static_cast<uint64_t>(s.n + s.k));
        wbytes = w.bytes();
        const std::size_t copies = std::max<std::size_t>(1, (sz.rotate_bytes + wbytes - 1) / wbytes);
        for (std::size_t c = 0; c < copies; ++c) handles.push_back(b.prepare_linear(w.view()));
        out = alloc(b, DType::kF32, {max_m, s.n}, "linear out");
      } catch (const std::exception& e) {
        for (int64_t m : sz.ms) {
          Result r = base;
          r.m = m;
          bench.failed(r, e);
        }
        continue;
      }
      for (int64_t m : sz.ms) {
        Result r = base;
        r.m = m;
        r.bytes = static_cast<double>(wbytes) + static_cast<double>(m * s.k * 2 + m * s.n * 4);
        r.flops = 2.0 * static_cast<double>(m * s.n * s.k);
        const TensorView xv = TensorView::contiguous(x.view.data, DType::kBF16, {m, s.k}, x.view.device);
        const TensorView ov = out.view.rows(0, m);
        bench.run(r, [&](int64_t i) {
          const LinearOut o{handles[static_cast<std::size_t>(i) % handles.size()], ov};
          b.linears(xv, {&o, 1});
        });
      }
    }
}

// The sparse MoE block with NVFP4 experts: router (bf16), top-8 of 256, SwiGLU experts, shared expert
// with its sigmoid gate. Rotated over layers so that M = 1's eight experts come from HBM.
void bench_moe(Backend& b, Bench& bench) {
  const std::string op = "moe block";
  if (!bench.wanted(op)) return;
  const HostWeight router = host_weight(WeightLayout::kBf16, kExperts, kHidden, 11);
  const HostWeight sgate = host_weight(WeightLayout::kBf16, 1, kHidden, 12);
  const HostWeight gate = host_weight(WeightLayout::kNvfp4, kMoeInter, kHidden, 13);
  const HostWeight up = host_weight(WeightLayout::kNvfp4, kMoeInter, kHidden, 14);
  const HostWeight down = host_weight(WeightLayout::kNvfp4, kHidden, kMoeInter, 15);
  const HostWeight s_gate = host_weight(WeightLayout::kNvfp4, kSharedInter, kHidden, 16);
  const HostWeight s_up = host_weight(WeightLayout::kNvfp4, kSharedInter, kHidden, 17);
  const HostWeight s_down = host_weight(WeightLayout::kNvfp4, kHidden, kSharedInter, 18);
  // Distinct bytes per expert do not matter for speed; distinct device copies do (prepare_moe copies).
  MoeWeights w;
  w.router = router.view();
  w.experts.assign(static_cast<std::size_t>(kExperts), ExpertWeights{gate.view(), up.view(), down.view()});
  w.has_shared = true;
  w.shared = ExpertWeights{s_gate.view(), s_up.view(), s_down.view()};
  w.shared_gate = sgate.view();
  w.top_k = static_cast<int>(kTopK);
  const double expert_bytes = static_cast<double>(gate.bytes() + up.bytes() + down.bytes());
  const double fixed_bytes = static_cast<double>(router.bytes() + sgate.bytes() + s_gate.bytes() + s_up.bytes() + s_down.bytes());
  const std::string shape = "E=256 top8 I=512 +shared";
  std::vector<MoeHandle> layers;
  Tensor x, out;
  try {
    for (int l = 0; l < sz.moe_layers; ++l) layers.push_back(b.prepare_moe(w));
    x = upload(b, DType::kBF16, {sz.max_m(), kHidden}, random_bf16(static_cast<std::size_t>(sz.max_m() * kHidden), 19),
               "moe x");
    out = alloc(b, DType::kBF16, {sz.max_m(), kHidden}, "moe out");
  } catch (const std::exception& e) {
    for (int64_t m : sz.ms) bench.failed({op, shape, "nvfp4", m, 0, 0, 0, "ok"}, e);
    return;
  }
  for (int64_t m : sz.ms) {
    // Experts hit by M tokens under uniform routing (expected): E (1 - (1 - k/E)^M).
    const double hit = kExperts * (1.0 - std::pow(1.0 - double(kTopK) / kExperts, double(m)));
    Result r{op, shape, "nvfp4", m, 0, 0, 0, "ok"};
    r.bytes = hit * expert_bytes + fixed_bytes + 2.0 * m * kHidden * 2;
    r.flops = 2.0 * m * (kTopK * 3.0 * kMoeInter * kHidden + 3.0 * kSharedInter * kHidden + (kExperts + 1.0) * kHidden);
    const TensorView xv = x.view.rows(0, m), ov = out.view.rows(0, m);
    bench.run(r, [&](int64_t i) { b.moe(xv, layers[static_cast<std::size_t>(i) % layers.size()], ov); });
  }
}

// Paged attention (block 16) over fp8 e4m3 or bf16 KV: decode of M sequences at 32k context each, and
// the prefill of one sequence of T tokens. The caches are filled with finite random codes.
void bench_attention(Backend& b, Bench& bench) {
  for (KvDtype kv : {KvDtype::kFp8E4M3, KvDtype::kBf16}) {
    const bool fp8 = kv == KvDtype::kFp8E4M3;
    const int64_t elem = fp8 ? 1 : 2;
    const char* fmt = fp8 ? "fp8" : "bf16";
    const int64_t row_bytes = kHkv * kHeadDim * elem;
    // Sized for the largest case: 256 sequences x 32k tokens (fp8 8.6 GB, bf16 17 GB).
    const int64_t ctx = sz.ctx, max_seqs = sz.max_m(), blocks_per_seq = ctx / kKvBlock;
    const int64_t blocks = max_seqs * blocks_per_seq;
    const std::string dec = "attention decode", pre = "attention prefill";
    if (!bench.wanted(dec) && !bench.wanted(pre)) continue;
    DeviceBuffer kc, vc;
    Tensor q, gate, out;
    try {
      kc = b.allocate(static_cast<std::size_t>(blocks * kKvBlock * row_bytes), "k cache");
      vc = b.allocate(kc.bytes(), "v cache");
      const std::size_t pattern_bytes = std::min<std::size_t>(std::size_t{64} << 20, kc.bytes());
      const std::vector<uint8_t> pattern = fp8 ? random_e4m3(pattern_bytes, 21) : [&] {
        const auto v = random_bf16(pattern_bytes / 2, 22);
        std::vector<uint8_t> p(v.size() * 2);
        std::memcpy(p.data(), v.data(), p.size());
        return p;
      }();
      fill_repeating(b, kc, pattern);
      fill_repeating(b, vc, pattern);
      const int64_t max_t = std::max(sz.max_t(), sz.max_m());
      q = upload(b, DType::kBF16, {max_t, kHq, kHeadDim}, random_bf16(max_t * kHq * kHeadDim, 23), "q");
      gate = upload(b, DType::kBF16, {max_t, kHq * kHeadDim}, random_bf16(max_t * kHq * kHeadDim, 24), "gate");
      out = alloc(b, DType::kBF16, {max_t, kHq * kHeadDim}, "attention out");
    } catch (const std::exception& e) {
      for (int64_t m : sz.ms) bench.failed({dec, "ctx=" + std::to_string(ctx) + " Hq=16 Hkv=2 D=256", fmt, m, 0, 0, 0, "ok"}, e);
      continue;
    }
    // Sequence s owns blocks [s * blocks_per_seq, ...), in a scattered order as a real pool's.
    std::vector<int32_t> table(static_cast<std::size_t>(blocks));
    std::iota(table.begin(), table.end(), 0);
    Rng rng(25);
    for (std::size_t i = table.size(); i > 1; --i) std::swap(table[i - 1], table[rng.next() % i]);
    auto kv_of = [&](int64_t s, int64_t entries) {
      KvView v;
      v.dtype = kv;
      v.k = kc.data();
      v.v = vc.data();
      v.block_size = kKvBlock;
      v.block_table = table.data() + s * blocks_per_seq;
      v.num_table_entries = entries;
      v.n_kv_heads = static_cast<int>(kHkv);
      v.head_dim = static_cast<int>(kHeadDim);
      v.k_scale = fp8 ? 0.05f : 1.0f;
      v.v_scale = fp8 ? 0.03f : 1.0f;
      return v;
    };
    if (bench.wanted(dec))
      for (int64_t m : sz.ms) {
        std::vector<AttentionSeqDesc> descs;
        for (int64_t s = 0; s < m; ++s) descs.push_back({{s, 1, ctx - 1}, kv_of(s, blocks_per_seq)});
        Result r{dec, "ctx=" + std::to_string(ctx) + " Hq=16 Hkv=2 D=256", fmt, m, 0, 0, 0, "ok"};
        r.bytes = double(m) * (double(ctx) * 2 * row_bytes + 3.0 * kHq * kHeadDim * 2);
        r.flops = double(m) * 2.0 * 2.0 * kHq * kHeadDim * double(ctx);
        const TensorView qv = q.view.rows(0, m), gv = gate.view.rows(0, m), ov = out.view.rows(0, m);
        bench.run(r, [&](int64_t) { b.attention(descs, qv, gv, ov, AttentionMath::kHfEager); });
      }
    if (bench.wanted(pre))
      for (int64_t t : sz.prefill) {
        const AttentionSeqDesc d{{0, t, 0}, kv_of(0, (t + kKvBlock - 1) / kKvBlock)};
        Result r{pre, "T=" + std::to_string(t) + " from pos 0", fmt, t, 0, 0, 0, "ok"};
        r.bytes = double(t) * (2.0 * row_bytes + 3.0 * kHq * kHeadDim * 2);
        r.flops = 2.0 * 2.0 * kHq * kHeadDim * double(t) * double(t + 1) / 2.0;
        const TensorView qv = q.view.rows(0, t), gv = gate.view.rows(0, t), ov = out.view.rows(0, t);
        bench.run(r, [&](int64_t) { b.attention({&d, 1}, qv, gv, ov, AttentionMath::kHfEager); });
      }
  }
}

// Gated DeltaNet: the decode step of M sequences (one gdn_sequences call, as the model makes it)
// and the prefill of one sequence of T tokens; state slots rotate past the L2.
void bench_gdn(Backend& b, Bench& bench) {
  const std::string dec = "gdn decode", pre = "gdn prefill";
  if (!bench.wanted(dec) && !bench.wanted(pre)) return;
  GdnDims d;
  d.Hk = kGdnHk, d.Hv = kGdnHv, d.dk = kGdnDk, d.dv = kGdnDv, d.conv_kernel = kGdnConv;
  const int64_t C = d.conv_dim(), slots = sz.gdn_slots, max_t = std::max(sz.max_t(), sz.max_m());
  const std::string shape = "Hk=16 Hv=32 dk=dv=128";
  std::vector<uint16_t> conv_w = random_bf16(static_cast<std::size_t>(C * d.conv_kernel), 31, 0.5f);
  TensorView w;
  Tensor x, g, beta, conv, ssm, qkv, core;
  try {
    w = b.prepare_tensor(TensorView::contiguous(conv_w.data(), DType::kBF16, {C, d.conv_kernel}));
    x = upload(b, DType::kBF16, {max_t, C}, random_bf16(static_cast<std::size_t>(max_t * C), 32), "gdn x");
    std::vector<float> gh = random_f32(static_cast<std::size_t>(max_t * d.Hv), 33), bh(gh.size());
    for (std::size_t i = 0; i < gh.size(); ++i) bh[i] = 1.0f / (1.0f + std::exp(-gh[i])), gh[i] = -0.3f * std::fabs(gh[i]);
    g = upload(b, DType::kF32, {max_t, d.Hv}, gh, "gdn g");
    beta = upload(b, DType::kF32, {max_t, d.Hv}, bh, "gdn beta");
    conv = upload(b, DType::kBF16, {slots, d.conv_state_elems()},
                  random_bf16(static_cast<std::size_t>(slots * d.conv_state_elems()), 34), "conv states");
    ssm = alloc(b, DType::kF32, {slots, d.state_elems()}, "ssm states");  // 1 GiB
    const auto s0 = random_f32(std::min<std::size_t>(std::size_t{8} << 20, ssm.buf.bytes() / 4), 35, 0.1f);
    std::vector<uint8_t> pattern(s0.size() * 4);
    std::memcpy(pattern.data(), s0.data(), pattern.size());
    fill_repeating(b, ssm.buf, pattern);
    qkv = alloc(b, DType::kBF16, {max_t, C}, "qkv out");
    core = alloc(b, DType::kBF16, {max_t, d.value_dim()}, "core out");
  } catch (const std::exception& e) {
    for (int64_t m : sz.ms) bench.failed({dec, shape, "f32 state", m, 0, 0, 0, "ok"}, e);
    return;
  }
  auto state = [&](int64_t slot) {
    return GdnStateRef{conv.view.as<uint16_t>() + slot * d.conv_state_elems(), ssm.view.as<float>() + slot * d.state_elems()};
  };
  const double state_bytes = double(d.state_elems()) * 4 + double(d.conv_state_elems()) * 2;
  // Per token: decay, k^T S, the rank-1 update and q^T S over each v head's dk x dv state (~7 flops per
  // element), and the causal conv.
  const double token_flops = 7.0 * d.Hv * d.dk * d.dv + 2.0 * C * d.conv_kernel;
  const double token_bytes = double(C) * 2 * 2 + double(d.Hv) * 4 * 2 + double(d.value_dim()) * 2;
  if (bench.wanted(dec))
    for (int64_t m : sz.ms) {
      Result r{dec, shape, "f32 state", m, 0, 0, 0, "ok"};
      r.bytes = double(m) * (2 * state_bytes + token_bytes);
      r.flops = double(m) * token_flops;
      std::vector<GdnSeqDesc> descs(static_cast<std::size_t>(m));
      bench.run(r, [&](int64_t i) {
        for (int64_t s = 0; s < m; ++s) descs[static_cast<std::size_t>(s)] = {{s, 1, 1000}, state((i * m + s) % slots)};
        b.gdn_sequences(d, w, descs, x.view.rows(0, m), g.view.rows(0, m), beta.view.rows(0, m), qkv.view.rows(0, m),
                        core.view.rows(0, m));
      });
    }
  if (bench.wanted(pre))
    for (int64_t t : sz.prefill) {
      Result r{pre, shape + " T=" + std::to_string(t), "f32 state", t, 0, 0, 0, "ok"};
      r.bytes = 2 * state_bytes + double(t) * token_bytes;
      r.flops = double(t) * token_flops;
      bench.run(r, [&](int64_t i) {
        b.gdn_sequence(d, w, {{0, t, 0}, state(i % slots)}, x.view.rows(0, t), g.view.rows(0, t), beta.view.rows(0, t),
                       qkv.view.rows(0, t), core.view.rows(0, t));
      });
    }
}

void bench_rmsnorm(Backend& b, Bench& bench) {
  const std::string op = "rmsnorm";
  if (!bench.wanted(op)) return;
  std::vector<float> wh = random_f32(kHidden, 41, 0.1f);
  for (float& v : wh) v = bf16_to_f32(f32_to_bf16(v));
  const int64_t rows = sz.max_m() * sz.norm_inputs;  // rotation: distinct [M, 2048] inputs (64 MiB at the model's sizes)
  Tensor x, out;
  TensorView w;
  try {
    w = b.prepare_tensor(TensorView::contiguous(wh.data(), DType::kF32, {kHidden}));
    x = upload(b, DType::kBF16, {rows, kHidden}, random_bf16(static_cast<std::size_t>(rows * kHidden), 42), "x");
    out = alloc(b, DType::kBF16, {rows, kHidden}, "out");
  } catch (const std::exception& e) {
    for (int64_t m : sz.ms) bench.failed({op, "D=2048 (1+w)", "bf16", m, 0, 0, 0, "ok"}, e);
    return;
  }
  for (int64_t m : sz.ms) {
    Result r{op, "D=2048 (1+w)", "bf16", m, 0, 0, 0, "ok"};
    r.bytes = double(m) * kHidden * 2 * 2 + kHidden * 4;
    r.flops = double(m) * kHidden * 4;
    bench.run(r, [&](int64_t i) {
      const int64_t r0 = (i % (rows / m)) * m;
      b.rmsnorm(x.view.rows(r0, m), w, 1e-6f, NormKind::kOnePlus, out.view.rows(r0, m));
    });
  }
}

// Sampling M rows of 248,320 logits: greedy, and Qwen's recommended random setting (temperature 0.7,
// top-k 20, top-p 0.8), seeded.
void bench_sampling(Backend& b, Bench& bench) {
  const std::string op = "sample";
  if (!bench.wanted(op)) return;
  Tensor logits;
  try {
    logits = upload(b, DType::kF32, {sz.max_m(), kVocab}, random_f32(static_cast<std::size_t>(sz.max_m() * kVocab), 51, 4.0f),
                    "logits");
  } catch (const std::exception& e) {
    for (int64_t m : sz.ms) bench.failed({op, "V=248320", "f32", m, 0, 0, 0, "ok"}, e);
    return;
  }
  SamplingOptions greedy;
  greedy.temperature = 0.0;
  SamplingOptions random;
  random.temperature = 0.7;
  random.top_k = 20;
  random.top_p = 0.8;
  random.seed = 1234;
  uint64_t draws = 0;
  SamplingConfig cfg;
  cfg.vocab_size = kVocab, cfg.valid_vocab_size = kValidVocab, cfg.seed = 7, cfg.engine_draws = &draws;
  const std::pair<const char*, const SamplingOptions*> settings[] = {{"greedy", &greedy},
                                                                      {"t=0.7 top-k 20 top-p 0.8", &random}};
  for (const auto& [name, opts] : settings)
    for (int64_t m : sz.ms) {
      std::vector<SampleRow> rows(static_cast<std::size_t>(m));
      for (auto& row : rows) row.options = opts;
      std::vector<SampleResult> res(rows.size());
      Result r{op, std::string("V=248320 ") + name, "f32", m, 0, 0, 0, "ok"};
      r.bytes = double(m) * kVocab * 4;
      const TensorView lv = logits.view.rows(0, m);
      bench.run(r, [&](int64_t) { b.sample(lv, rows, cfg, res); });
    }
}

int usage() {
  std::fprintf(stderr, "usage: cuda_ops_bench OUT_DIR [--budget-s SECONDS] [--filter SUBSTRING] [--cpu-check]\n");
  return 1;
}

void run_all(Backend& b, Bench& bench, Report& report) {
  for (auto* f : {bench_linears, bench_moe, bench_attention, bench_gdn, bench_rmsnorm, bench_sampling}) {
    try {
      f(b, bench);
    } catch (const std::exception& e) {  // a failure outside a timed call: the group's remaining cases go
      std::printf("  a case group stopped: %s\n", e.what());
      report.results.push_back({"(group)", "-", "-", 0, 0, 0, 0, Bench::classify(e.what())});
      report.write();
    }
  }
}

void reserve_for_model(Backend& b) {
  StepLimits limits;
  limits.max_tokens = std::max(sz.max_t(), sz.max_m()), limits.max_seqs = sz.max_m(), limits.max_logit_rows = sz.max_m();
  limits.max_context = sz.ctx;
  ModelShape shape;
  shape.hidden = kHidden, shape.max_linear_k = 4096, shape.num_q_heads = kHq, shape.num_kv_heads = kHkv;
  shape.head_dim = kHeadDim, shape.experts = kExperts, shape.top_k = kTopK, shape.moe_intermediate = kMoeInter;
  shape.shared_intermediate = kSharedInter, shape.gdn_key_dim = int64_t(kGdnHk) * kGdnDk;
  shape.gdn_value_heads = kGdnHv, shape.gdn_head_v_dim = kGdnDv;
  b.reserve(limits, shape);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage();
  const std::filesystem::path dir = argv[1];
  double budget_s = 150;
  std::string filter;
  bool cpu_check = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--budget-s" && i + 1 < argc) budget_s = std::atof(argv[++i]);
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--cpu-check") cpu_check = true;
    else return usage();
  }
  try {
    std::filesystem::create_directories(dir);
    if (cpu_check) {  // every case's setup and calls through the CPU backend, at small sizes
      sz = cpu_check_sizes();
      // At most the avx2 tier: no weight packing at load (the panel tiers' packing of 256 experts took
      // ~14 s of CI time for nothing this check needs).
      kernels::cpu::CpuBackend cpu(std::min(kernels::cpu::active_isa(), kernels::cpu::Isa::kAvx2));
      reserve_for_model(cpu);
      Report report(dir, "--cpu-check: " + cpu.describe() + " (small sizes; not a measurement)");
      Bench bench(cpu, nullptr, report, budget_s, filter);
      run_all(cpu, bench, report);
      std::size_t bad = 0;
      for (const Result& r : report.results) bad += r.status != "ok";
      std::printf("cuda_ops_bench --cpu-check: %zu cases, %zu not ok, %.0f s\n", report.results.size(), bad,
                  bench.elapsed());
      return bad == 0 ? 0 : 1;
    }
    std::unique_ptr<Backend> any = cuda::make_cuda_backend_if_present();
    if (!any) {
      std::printf("cuda_ops_bench: no CUDA device on this machine (%d visible): nothing to measure\n",
                  cuda::device_count());
      return 2;
    }
    auto& b = static_cast<cuda::CudaBackend&>(*any);
    reserve_for_model(b);
    Report report(dir, b.info().describe());
    std::printf("cuda_ops_bench on %s\n", b.info().describe().c_str());
    report.copy_gbs = copy_bandwidth_gbs(b);
    std::printf("copy bandwidth (D2D 1 GiB, read + write): %.0f GB/s\n", report.copy_gbs);
    report.write();
    Bench bench(b, b.context().stream, report, budget_s, filter);
    run_all(b, bench, report);
    std::printf("cuda_ops_bench: %zu cases in %.0f s -> %s\n", report.results.size(), bench.elapsed(),
                (dir / "cuda_ops_bench.md").c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_ops_bench: %s\n", e.what());
    return 1;
  }
}
