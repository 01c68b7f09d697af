#include "kernels/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>

#include <fmt/format.h>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_weight_cache.h"
#include "kernels/cpu/sampling_cpu.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cpu/norm_cpu.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/gdn_cpu.h"
#include "kernels/gdn_seqs.h"
#include "kernels/cpu/moe_cpu.h"
#include "kernels/cpu/rope_cpu.h"
#include "kernels/cpu/activation_cpu.h"

namespace fp4serve::kernels::cpu {
namespace {

constexpr std::size_t kMapThreshold = 64 * 1024;

std::shared_ptr<void> zeroed_memory(std::size_t bytes, std::string_view what) {
  if (bytes == 0) return {};
  if (bytes >= kMapThreshold) {
    // Anonymous mappings are zero pages until written: a cache sized to the budget is free until used.
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
  }
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::runtime_error(fmt::format("cannot allocate {} bytes for {}", bytes, what));
  std::memset(p, 0, bytes);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

// The kernels behind most ops walk a tensor as one block of rows: a view with strided rows
// (tensor_view.h allows them where an op does not say otherwise) is rejected, never read as if
// contiguous (which read and wrote the bytes between its rows).
void expect_contiguous(std::initializer_list<const TensorView*> views, const char* op) {
  for (const TensorView* v : views)
    if (!v->is_contiguous()) throw std::invalid_argument(std::string(op) + ": the CPU backend takes contiguous views only");
}

void check_rows(const TensorView& v, int64_t rows, const char* what) {
  if (v.rank < 1 || v.dim(0) < rows) throw std::invalid_argument(std::string(what) + ": fewer rows than the step");
}

}  // namespace

CpuBackend::CpuBackend(Isa isa)
    : isa_(isa), pack_(kernel_table(isa).linear_packed != nullptr) {
  if (!isa_supported(isa)) throw std::runtime_error(fmt::format("CPU backend: this CPU cannot run the {} tier", isa_name(isa)));
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::describe() const {
  return fmt::format("cpu {} ({} threads)", isa_name(isa_), num_threads());
}

void CpuBackend::reserve(const StepLimits& l, const ModelShape& m) {
  // Floors of the kernels' per-thread scratch (thread_scratch.h): each thread allocates a slot once,
  // at first use, at these sizes; large ones are mapped lazily, so unused room costs address space.
  const auto T = static_cast<std::size_t>(std::max<int64_t>(1, l.max_tokens));
  const auto R = T * static_cast<std::size_t>(std::max<int64_t>(1, m.top_k));
  const auto E = static_cast<std::size_t>(m.experts), H = static_cast<std::size_t>(m.hidden);
  const auto ctx = static_cast<std::size_t>(std::max<int64_t>(1, l.max_context));
  const auto D = static_cast<std::size_t>(m.head_dim);
  const auto group = static_cast<std::size_t>(m.num_kv_heads > 0 ? m.num_q_heads / m.num_kv_heads : 1);
  const std::size_t queries = 32 * group;  // attention_cpu.cpp kTokensPerItem x group
  const auto raise = [](Scratch s, std::size_t bytes) { raise_scratch_floor(s, bytes); };
  raise(Scratch::kLinearX, T * static_cast<std::size_t>(m.max_linear_k) * 4);
  raise(Scratch::kLinearBlocks, (2 * (2 * E + 3) + 1) * sizeof(int64_t));
  raise(Scratch::kLinearTile, 4 * static_cast<std::size_t>(std::max(
                                      linear_scratch_floats(static_cast<int64_t>(T), m.max_linear_k),
                                      packed_linear_scratch_floats(static_cast<int64_t>(T), (m.max_linear_k + 127) / 128 * 128))));
  raise(Scratch::kAttnSeqs, static_cast<std::size_t>(l.max_seqs) * sizeof(AttentionSeq));
  raise(Scratch::kAttnItems, static_cast<std::size_t>(m.num_kv_heads) * (static_cast<std::size_t>(l.max_seqs) + T) * 32);
  raise(Scratch::kAttnK, ctx * D * 4);
  raise(Scratch::kAttnV, ctx * D * 4);
  raise(Scratch::kAttnQ, queries * D * 4);
  raise(Scratch::kAttnAcc, queries * D * 4);
  raise(Scratch::kAttnSums, queries * 4);
  raise(Scratch::kAttnScores, std::max<std::size_t>(std::min<std::size_t>(std::size_t{2} << 20, queries * ctx), group * ctx) * 4);
  raise(Scratch::kGdnQ, T * static_cast<std::size_t>(m.gdn_key_dim) * 4);
  raise(Scratch::kGdnK, T * static_cast<std::size_t>(m.gdn_key_dim) * 4);
  raise(Scratch::kGdnV, T * static_cast<std::size_t>(m.gdn_head_v_dim) * 4);
  raise(Scratch::kGdnOut, T * static_cast<std::size_t>(m.gdn_head_v_dim) * 4);
  raise(Scratch::kGdnDecay, T * 4);
  raise(Scratch::kGdnBeta, T * 4);
  raise(Scratch::kGdnFirst, (static_cast<std::size_t>(l.max_seqs) + 1) * sizeof(int64_t));
  const auto I = static_cast<std::size_t>(m.moe_intermediate), Is = static_cast<std::size_t>(m.shared_intermediate);
  raise(Scratch::kMoeXf, T * H * 4);
  raise(Scratch::kMoeLogits, T * E * 4);
  raise(Scratch::kMoeRw, R * 4);
  raise(Scratch::kMoeXg, R * H * 4);
  raise(Scratch::kMoeG, R * I * 4);
  raise(Scratch::kMoeU, R * I * 4);
  raise(Scratch::kMoeSg, T * Is * 4);
  raise(Scratch::kMoeSu, T * Is * 4);
  raise(Scratch::kMoeSgate, T * 4);
  raise(Scratch::kMoeD, R * H * 4);
  raise(Scratch::kMoeSd, T * H * 4);
  for (Scratch s : {Scratch::kMoeIdx, Scratch::kMoeToken, Scratch::kMoeSlot, Scratch::kMoeRowOf}) raise(s, R * 4);
  for (Scratch s : {Scratch::kMoeOffsets, Scratch::kMoeFill, Scratch::kMoeProbs, Scratch::kMoeOrder}) raise(s, (E + 1) * 4);
  raise(Scratch::kMoeJobs, (2 * E + 3) * sizeof(LinearJob));
}

// ---- memory -------------------------------------------------------------------------------

DeviceBuffer CpuBackend::allocate(std::size_t bytes, std::string_view what) {
  return DeviceBuffer(zeroed_memory(bytes, what), bytes, Device::kCpu);
}

void CpuBackend::upload(const TensorView& dst, const void* host) {
  if (!dst.is_contiguous()) throw std::invalid_argument("CpuBackend::upload: destination is not contiguous");
  std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::download(void* host, const TensorView& src) {
  if (!src.is_contiguous()) throw std::invalid_argument("CpuBackend::download: source is not contiguous");
  std::memcpy(host, src.data, src.bytes());
}

void CpuBackend::copy(const TensorView& dst, const TensorView& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel())
    throw std::invalid_argument("CpuBackend::copy: views differ in type or size");
  if (dst.is_contiguous() && src.is_contiguous()) {
    std::memmove(dst.data, src.data, src.bytes());
    return;
  }
  // Strided 2-D: rows of contiguous elements.
  if (dst.rank != 2 || src.rank != 2 || dst.shape != src.shape || dst.stride[1] != 1 || src.stride[1] != 1)
    throw std::invalid_argument("CpuBackend::copy: only contiguous or row-strided 2-D views");
  const std::size_t es = src.element_size();
  const std::size_t row = static_cast<std::size_t>(src.dim(1)) * es;
  for (int64_t r = 0; r < src.dim(0); ++r) {
    std::memcpy(static_cast<char*>(dst.data) + static_cast<std::size_t>(r * dst.stride[0]) * es,
                static_cast<const char*>(src.data) + static_cast<std::size_t>(r * src.stride[0]) * es, row);
  }
}

void CpuBackend::zero(const TensorView& dst) {
  if (!dst.is_contiguous()) throw std::invalid_argument("CpuBackend::zero: view is not contiguous");
  std::memset(dst.data, 0, dst.bytes());
}

// ---- weights ------------------------------------------------------------------------------

WeightView CpuBackend::prepared_view(const WeightView& w, const ReleaseSource& release) {
  if (w.format == WeightLayout::kInt4Gptq) {
    // The fast CPU layout on every tier: nibble rows and fp32 scales (weights.h kInt4Packed).
    int4_.push_back(int4_repack(w));
    return int4_.back().view();
  }
  if (!pack_ || !packable(w)) return w;
  const auto t0 = std::chrono::steady_clock::now();
  PackedWeight cached;
  if (cache_reader_ && !cache_stale_ && cache_reader_->take(static_cast<size_t>(packed_linears_), w, cached)) {
    packed_.push_back(std::move(cached));  // panels in the cache file's mapping: nothing to pack
    ++cache_hits_;
  } else {
    if (cache_reader_) cache_stale_ = true;  // entries out of step with the model: rebuilt next start
    if (!arena_) arena_ = std::make_unique<PanelArena>();
    packed_.push_back(pack_weight(w, arena_.get()));
    if (cache_writer_) cache_writer_->add(packed_.back());
  }
  pack_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  packed_bytes_ += packed_.back().size_bytes();
  ++packed_linears_;
  // The panels are a copy in the kernels' order: the checkpoint's pages of the weight can go (still
  // readable; they fault back from the page cache if a lower tier ever reads the plain view).
  if (release)
    for (const auto& range : weight_source_bytes(w)) release(range);
  return with_packed(w, packed_.back());
}

LinearHandle CpuBackend::prepare_linear(const WeightView& w, const ReleaseSource& release) {
  std::lock_guard lock(mu_);
  linears_.push_back(prepared_view(w, release));
  return LinearHandle{&linears_.back(), w.n, w.k, w.format};
}

MoeHandle CpuBackend::prepare_moe(const MoeWeights& moe, const ReleaseSource& release) {
  std::lock_guard lock(mu_);
  MoeWeights m = moe;
  m.router = prepared_view(moe.router, release);
  for (ExpertWeights& e : m.experts) {
    e.gate = prepared_view(e.gate, release);
    e.up = prepared_view(e.up, release);
    e.down = prepared_view(e.down, release);
  }
  if (m.has_shared) {
    m.shared.gate = prepared_view(m.shared.gate, release);
    m.shared.up = prepared_view(m.shared.up, release);
    m.shared.down = prepared_view(m.shared.down, release);
    m.shared_gate = prepared_view(m.shared_gate, release);
  }
  moes_.push_back(std::move(m));
  return MoeHandle{&moes_.back(), moe.router.k, static_cast<int64_t>(moe.experts.size()), moe.top_k};
}

TensorView CpuBackend::prepare_tensor(const TensorView& host) { return host; }

bool CpuBackend::use_weight_cache(const std::filesystem::path& file, const std::string& identity) {
  std::lock_guard lock(mu_);
  if (!pack_) return false;
  cache_file_ = file;
  const std::string key = fmt::format("{}\ntier={}\npanel-format={}", identity, isa_name(isa_), kPackedWeightCacheVersion);
  std::string why;
  cache_reader_ = PackedWeightCacheReader::open(file, key, &why);
  if (cache_reader_) {
    cache_note_ = fmt::format("mapped from {}", file.string());
    return true;
  }
  try {
    cache_writer_ = std::make_unique<PackedWeightCacheWriter>(file, key);
    cache_note_ = why;  // "no cache file yet", "stale: ...", ...
  } catch (const std::exception& e) {
    cache_note_ = fmt::format("not written: {}", e.what());
  }
  return false;
}

std::string CpuBackend::finish_weight_cache() {
  std::lock_guard lock(mu_);
  if (cache_file_.empty()) return "";
  std::string line;
  if (cache_reader_) {
    line = fmt::format("Weight cache: {} of {} packed linears {}", cache_hits_, packed_linears_, cache_note_);
    if (cache_stale_ || cache_hits_ != static_cast<int64_t>(cache_reader_->size())) {
      std::error_code ec;
      std::filesystem::remove(cache_file_, ec);  // the mapping stays valid; the next start rebuilds it
      line += "; its entries did not match this model, so it was removed and is rebuilt at the next start";
    }
  } else if (cache_writer_) {
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    if (cache_writer_->commit(&why)) {
      line = fmt::format("Weight cache: wrote {} ({}; {:.2f} GB, {:.1f} s to finish); the next start maps it instead "
                         "of packing",
                         cache_file_.string(), cache_note_, static_cast<double>(cache_writer_->bytes_written()) / 1e9,
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    } else {
      line = "Weight cache: not written: " + why;
    }
    cache_writer_.reset();
  } else {
    line = "Weight cache: " + cache_note_;
  }
  return line;
}

std::string CpuBackend::weights_summary() const {
  if (packed_linears_ == 0) return fmt::format("CPU weights: read in place ({} tier has no panel kernels)", isa_name(isa_));
  if (cache_hits_ == packed_linears_)
    return fmt::format("CPU weights: {} linears in 16-row panels for the {} kernels mapped from the weight cache "
                       "({:.2f} GB, {:.2f} s, nothing packed)",
                       packed_linears_, isa_name(isa_), static_cast<double>(packed_bytes_) / 1e9, pack_seconds_);
  return fmt::format("CPU weights: {} linears packed at load into 16-row panels for the {} kernels ({:.2f} GB, {:.1f} s)",
                     packed_linears_, isa_name(isa_), static_cast<double>(packed_bytes_) / 1e9, pack_seconds_);
}

// ---- ops ----------------------------------------------------------------------------------

void CpuBackend::embedding(const TensorView& table, const TensorView& ids, const TensorView& out) {
  expect_view(table, DType::kBF16, {-1, -1}, "embedding table");
  expect_view(ids, DType::kI32, {-1}, "embedding ids");
  expect_view(out, DType::kBF16, {ids.dim(0), table.dim(1)}, "embedding out");
  expect_contiguous({&table, &out}, "embedding");
  embedding_lookup(table.as<const uint16_t>(), table.dim(0), table.dim(1), ids.as<const int32_t>(), ids.dim(0),
                   out.as<uint16_t>());
}

void CpuBackend::rmsnorm(const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "rmsnorm x");
  expect_view(w, DType::kF32, {x.dim(1)}, "rmsnorm weight");
  expect_view(out, DType::kBF16, {x.dim(0), x.dim(1)}, "rmsnorm out");
  if (!x.is_contiguous() || !out.is_contiguous()) throw std::invalid_argument("rmsnorm: rows must be contiguous");
  (void)kind;  // kOnePlus is the only kind
  rmsnorm_1p(x.as<const uint16_t>(), x.dim(0), x.dim(1), w.as<const float>(), eps, out.as<uint16_t>(), isa_);
}

void CpuBackend::rmsnorm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                               const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "rmsnorm_gated x");
  expect_view(z, DType::kBF16, {x.dim(0), x.dim(1)}, "rmsnorm_gated z");
  expect_view(w, DType::kF32, {x.dim(1)}, "rmsnorm_gated weight");
  expect_view(out, DType::kBF16, {x.dim(0), x.dim(1)}, "rmsnorm_gated out");
  expect_contiguous({&x, &z, &out}, "rmsnorm_gated");
  kernels::rmsnorm_gated(x.as<const uint16_t>(), z.as<const uint16_t>(), x.dim(0), x.dim(1), w.as<const float>(), eps,
                         out.as<uint16_t>(), isa_);
}

void CpuBackend::linears(const TensorView& x, std::span<const LinearOut> outs) {
  expect_view(x, DType::kBF16, {-1, -1}, "linears x");
  if (!x.is_contiguous()) throw std::invalid_argument("linears: x must be contiguous");
  const int64_t M = x.dim(0), K = x.dim(1);
  float* xf = scratch<float>(Scratch::kLinearX, static_cast<std::size_t>(M * K));
  bf16_to_f32(x.as<const uint16_t>(), xf, M * K);
  LinearJob* jobs = scratch<LinearJob>(Scratch::kLinearJobs, outs.size());
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const LinearOut& o = outs[i];
    if (o.w.k != K) throw std::invalid_argument(fmt::format("linears: weight of K {} for x of K {}", o.w.k, K));
    expect_view(o.out, DType::kF32, {M, o.w.n}, "linears out");
    jobs[i] = {xf, M, K, *static_cast<const WeightView*>(o.w.impl), o.out.as<float>(), o.out.stride[0]};
  }
  linear_batch(std::span<const LinearJob>(jobs, outs.size()), isa_);
}

void CpuBackend::to_bf16(const TensorView& x, const TensorView& out) {
  if (x.dtype != DType::kF32 || out.dtype != DType::kBF16 || x.numel() != out.numel() || !x.is_contiguous() ||
      !out.is_contiguous())
    throw std::invalid_argument("to_bf16: expected contiguous f32 in and bf16 out of the same size");
  f32_to_bf16(x.as<const float>(), out.as<uint16_t>(), x.numel());
}

void CpuBackend::round_bf16(const TensorView& x) {
  if (x.dtype != DType::kF32 || !x.is_contiguous()) throw std::invalid_argument("round_bf16: expected contiguous f32");
  round_bf16_inplace(x.as<float>(), x.numel());
}

void CpuBackend::residual_add(const TensorView& x, const TensorView& y) {
  expect_view(x, DType::kBF16, {-1, -1}, "residual x");
  expect_view(y, DType::kBF16, {x.dim(0), x.dim(1)}, "residual y");
  expect_contiguous({&x, &y}, "residual_add");
  uint16_t* a = x.as<uint16_t>();
  const uint16_t* b = y.as<const uint16_t>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) a[i] = f32_to_bf16_bits(bf16_bits_to_f32(a[i]) + bf16_bits_to_f32(b[i]));
}

void CpuBackend::rope(const TensorView& x, const TensorView& positions, const RopeConfig& cfg) {
  expect_view(x, DType::kBF16, {-1, -1, cfg.head_dim}, "rope x");
  expect_contiguous({&x}, "rope");
  const int64_t T = x.dim(0);
  if (positions.rank == 2) {
    expect_view(positions, DType::kI64, {3, T}, "rope positions");
    expect_contiguous({&positions}, "rope");
    const int64_t* p = positions.as<const int64_t>();
    apply_rope(x.as<uint16_t>(), T, x.dim(1), cfg, p, p + T, p + 2 * T);
    return;
  }
  expect_view(positions, DType::kI64, {T}, "rope positions");
  apply_rope_text(x.as<uint16_t>(), T, x.dim(1), cfg, positions.as<const int64_t>());
}

void CpuBackend::kv_write(std::span<const AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) {
  expect_view(k, DType::kBF16, {-1, -1, -1}, "kv_write k");
  expect_view(v, DType::kBF16, {k.dim(0), k.dim(1), k.dim(2)}, "kv_write v");
  expect_contiguous({&k, &v}, "kv_write");
  const int64_t row = k.dim(1) * k.dim(2);
  for (const AttentionSeqDesc& s : seqs) {
    if (s.seq.rows == 0) continue;
    check_rows(k, s.seq.row0 + s.seq.rows, "kv_write");
    kernels::kv_write(s.kv, k.as<const uint16_t>() + s.seq.row0 * row, v.as<const uint16_t>() + s.seq.row0 * row,
                      s.seq.rows, s.seq.pos0);
  }
}

void CpuBackend::attention(std::span<const AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
                           const TensorView& out, AttentionMath math) {
  expect_view(q, DType::kBF16, {-1, -1, -1}, "attention q");
  const int64_t T = q.dim(0), Hq = q.dim(1), D = q.dim(2);
  expect_view(gate, DType::kBF16, {T, Hq * D}, "attention gate");
  expect_view(out, DType::kBF16, {T, Hq * D}, "attention out");
  expect_contiguous({&q, &gate, &out}, "attention");
  AttentionSeq* work = scratch<AttentionSeq>(Scratch::kAttnSeqs, seqs.size());
  std::size_t n = 0;
  for (const AttentionSeqDesc& s : seqs) {
    if (s.seq.rows == 0) continue;
    check_rows(q, s.seq.row0 + s.seq.rows, "attention");
    AttentionSeq a;
    a.q = q.as<const uint16_t>() + s.seq.row0 * Hq * D;
    a.gate = gate.as<const uint16_t>() + s.seq.row0 * Hq * D;
    a.T = s.seq.rows;
    a.pos0 = s.seq.pos0;
    a.kv = s.kv;
    a.out = out.as<uint16_t>() + s.seq.row0 * Hq * D;
    work[n++] = a;
  }
  gated_attention(std::span<const AttentionSeq>(work, n), static_cast<int>(Hq), isa_, math);
}

void CpuBackend::gdn_gating(const TensorView& a, const TensorView& b, const TensorView& A_log,
                            const TensorView& dt_bias, const TensorView& g, const TensorView& beta) {
  expect_view(a, DType::kF32, {-1, -1}, "gdn_gating a");
  const int64_t T = a.dim(0), Hv = a.dim(1);
  expect_view(b, DType::kF32, {T, Hv}, "gdn_gating b");
  expect_view(A_log, DType::kF32, {Hv}, "gdn_gating A_log");
  expect_view(dt_bias, DType::kF32, {Hv}, "gdn_gating dt_bias");
  expect_view(g, DType::kF32, {T, Hv}, "gdn_gating g");
  expect_view(beta, DType::kF32, {T, Hv}, "gdn_gating beta");
  expect_contiguous({&a, &b, &g, &beta}, "gdn_gating");
  kernels::gdn_gating(a.as<const float>(), b.as<const float>(), A_log.as<const float>(), dt_bias.as<const float>(), T,
                      static_cast<int>(Hv), g.as<float>(), beta.as<float>());
}

void CpuBackend::gdn_sequences(const GdnDims& d, const TensorView& conv_weight, std::span<const GdnSeqDesc> seqs,
                               const TensorView& x, const TensorView& g, const TensorView& beta,
                               const TensorView& qkv_out, const TensorView& core_out) {
  const int64_t C = d.conv_dim(), Vd = d.value_dim();
  expect_view(conv_weight, DType::kBF16, {C, d.conv_kernel}, "gdn conv weight");
  expect_view(x, DType::kBF16, {-1, C}, "gdn x");
  expect_view(qkv_out, DType::kBF16, {x.dim(0), C}, "gdn qkv out");
  expect_view(core_out, DType::kBF16, {x.dim(0), Vd}, "gdn core out");
  expect_view(g, DType::kF32, {x.dim(0), d.Hv}, "gdn g");
  expect_view(beta, DType::kF32, {x.dim(0), d.Hv}, "gdn beta");
  expect_contiguous({&conv_weight, &x, &g, &beta, &qkv_out, &core_out}, "gdn_sequences");
  check_gdn_seqs(seqs, x.dim(0), d.conv_kernel, "gdn_sequences");
  if (d.Hk <= 0 || d.Hv % d.Hk != 0) throw std::invalid_argument("gdn_sequences: Hv must be a multiple of Hk");
  // The descs with rows, as the kernels see them (a handful of pointers per sequence).
  std::vector<GdnRows>& rows = gdn_thread_scratch<GdnRows>(seqs.size());
  for (const GdnSeqDesc& s : seqs) {
    if (s.seq.rows == 0) continue;
    const int64_t r = s.seq.row0;
    rows.push_back({x.as<const uint16_t>() + r * C, s.seq.rows, s.state.conv, s.state.ssm,
                    qkv_out.as<uint16_t>() + r * C, g.as<const float>() + r * d.Hv, beta.as<const float>() + r * d.Hv,
                    core_out.as<uint16_t>() + r * Vd});
  }
  if (rows.empty()) return;
  gdn_conv1d_seqs(rows, C, conv_weight.as<const uint16_t>(), d.conv_kernel, isa_);
  gdn_recurrent_seqs(rows, d, isa_);
}

void CpuBackend::moe(const TensorView& x, const MoeHandle& moe, const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, moe.hidden}, "moe x");
  expect_view(out, DType::kBF16, {x.dim(0), moe.hidden}, "moe out");
  expect_contiguous({&x, &out}, "moe");
  moe_block(x.as<const uint16_t>(), x.dim(0), *static_cast<const MoeWeights*>(moe.impl), out.as<uint16_t>(), isa_);
}

void CpuBackend::state_copy(std::span<const GdnStateRef> dst, std::span<const GdnStateRef> src, const GdnDims& d) {
  if (dst.size() != src.size()) throw std::invalid_argument("state_copy: layer counts differ");
  for (std::size_t l = 0; l < dst.size(); ++l) {
    std::copy_n(src[l].conv, d.conv_state_elems(), dst[l].conv);
    std::copy_n(src[l].ssm, d.state_elems(), dst[l].ssm);
  }
}

void CpuBackend::state_zero(std::span<const GdnStateRef> dst, const GdnDims& d) {
  for (const GdnStateRef& s : dst) {
    std::fill_n(s.conv, d.conv_state_elems(), uint16_t{0});
    std::fill_n(s.ssm, d.state_elems(), 0.0f);
  }
}

void CpuBackend::gather_rows(const TensorView& x, std::span<const int64_t> rows, const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "gather_rows x");
  const int64_t H = x.dim(1);
  expect_view(out, DType::kBF16, {static_cast<int64_t>(rows.size()), H}, "gather_rows out");
  expect_contiguous({&out}, "gather_rows");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= x.dim(0)) throw std::out_of_range("gather_rows: row outside the step");
    std::copy_n(x.as<const uint16_t>() + rows[i] * x.stride[0], H, out.as<uint16_t>() + static_cast<int64_t>(i) * H);
  }
}

void CpuBackend::sample(const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
                        std::span<SampleResult> out) {
  if (out.size() != rows.size()) throw std::invalid_argument("sample: one result per row");
  if (rows.empty()) return;
  expect_view(logits, DType::kF32, {static_cast<int64_t>(rows.size()), config.vocab_size}, "sample logits");
  sample_rows(logits.as<float>(), logits.stride[0], rows, config, out);
}

}  // namespace fp4serve::kernels::cpu
