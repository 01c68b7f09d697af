// A test backend that behaves at the step-graph seam the way a graph backend (CUDA graphs) must:
// capture_step runs the forward and records every call's signature -- the op, each tensor's data
// pointer, dtype and shape, the length of each descriptor span (never the host descriptors'
// contents, which replay stages anew) -- and replay_step runs the forward again, recording, then
// compares with the capture call by call and throws naming the first call that differs. Everything
// else delegates to the CPU backend, so results are the CPU's bits: a step replayed from a "graph"
// computes what the eager step computes, and any divergence of the op sequence (a shape, a buffer or
// a descriptor count that varies per step) is caught as a real graph would silently misbehave.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <filesystem>

#include "checkpoint/weight_loader.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/qwen3_5_moe.h"

namespace fp4serve::engine::testing {

class GraphRecordingBackend : public kernels::Backend {
 public:
  using TensorView = kernels::TensorView;

  struct Graph : kernels::StepGraph {
    std::vector<std::string> calls;
    std::size_t num_nodes() const override { return calls.size(); }
  };

  GraphRecordingBackend() : inner_(std::make_unique<kernels::cpu::CpuBackend>(kernels::cpu::active_isa())) {}

  int captures = 0, replays = 0;
  // Tests: the next replay's forward records into this instead of comparing (see mutation tests).
  bool graphs_enabled = true;

  std::unique_ptr<kernels::StepGraph> capture_step(const std::function<void()>& forward) override {
    if (!graphs_enabled) return nullptr;
    auto g = std::make_unique<Graph>();
    recording_ = &g->calls;
    try {
      forward();
    } catch (...) {
      recording_ = nullptr;
      throw;
    }
    recording_ = nullptr;
    ++captures;
    return g;
  }

  void replay_step(kernels::StepGraph& graph, const std::function<void()>& forward) override {
    auto& g = dynamic_cast<Graph&>(graph);
    std::vector<std::string> calls;
    recording_ = &calls;
    try {
      forward();
    } catch (...) {
      recording_ = nullptr;
      throw;
    }
    recording_ = nullptr;
    for (std::size_t i = 0; i < std::max(calls.size(), g.calls.size()); ++i) {
      const std::string a = i < g.calls.size() ? g.calls[i] : "(nothing)";
      const std::string b = i < calls.size() ? calls[i] : "(nothing)";
      if (a != b)
        throw std::logic_error(fmt::format("replay differs from the capture at call {}: captured {}, replayed {}", i,
                                           a, b));
    }
    ++replays;
  }

  kernels::Device device() const override { return inner_->device(); }
  std::string describe() const override { return "graph-recording " + inner_->describe(); }
  void reserve(const kernels::StepLimits& l, const kernels::ModelShape& s) override { inner_->reserve(l, s); }
  kernels::DeviceBuffer allocate(std::size_t bytes, std::string_view what) override {
    return inner_->allocate(bytes, what);
  }
  void upload(const TensorView& dst, const void* host) override {
    record("upload", {dst});
    inner_->upload(dst, host);
  }
  void download(void* host, const TensorView& src) override {
    record("download", {src});
    inner_->download(host, src);
  }
  void copy(const TensorView& dst, const TensorView& src) override {
    record("copy", {dst, src});
    inner_->copy(dst, src);
  }
  void zero(const TensorView& dst) override {
    record("zero", {dst});
    inner_->zero(dst);
  }
  void synchronize() override { inner_->synchronize(); }
  kernels::LinearHandle prepare_linear(const kernels::WeightView& w, const kernels::ReleaseSource& r = {}) override {
    return inner_->prepare_linear(w, r);
  }
  kernels::MoeHandle prepare_moe(const kernels::MoeWeights& m, const kernels::ReleaseSource& r = {}) override {
    return inner_->prepare_moe(m, r);
  }
  TensorView prepare_tensor(const TensorView& host) override { return inner_->prepare_tensor(host); }
  std::string weights_summary() const override { return inner_->weights_summary(); }

  void embedding(const TensorView& table, const TensorView& ids, const TensorView& out) override {
    record("embedding", {table, ids, out});
    inner_->embedding(table, ids, out);
  }
  void rmsnorm(const TensorView& x, const TensorView& w, float eps, kernels::NormKind kind,
               const TensorView& out) override {
    record("rmsnorm", {x, w, out});
    inner_->rmsnorm(x, w, eps, kind, out);
  }
  void rmsnorm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                     const TensorView& out) override {
    record("rmsnorm_gated", {x, z, w, out});
    inner_->rmsnorm_gated(x, z, w, eps, out);
  }
  void linears(const TensorView& x, std::span<const kernels::LinearOut> outs) override {
    std::vector<TensorView> t{x};
    for (const auto& o : outs) t.push_back(o.out);
    record_all("linears", t, {outs.size()});
    inner_->linears(x, outs);
  }
  void to_bf16(const TensorView& x, const TensorView& out) override {
    record("to_bf16", {x, out});
    inner_->to_bf16(x, out);
  }
  void round_bf16(const TensorView& x) override {
    record("round_bf16", {x});
    inner_->round_bf16(x);
  }
  void residual_add(const TensorView& x, const TensorView& y) override {
    record("residual_add", {x, y});
    inner_->residual_add(x, y);
  }
  void rope(const TensorView& x, const TensorView& positions, const kernels::RopeConfig& cfg) override {
    record("rope", {x, positions});
    inner_->rope(x, positions, cfg);
  }
  void kv_write(std::span<const kernels::AttentionSeqDesc> seqs, const TensorView& k, const TensorView& v) override {
    record("kv_write", {k, v}, {seqs.size()});
    inner_->kv_write(seqs, k, v);
  }
  void attention(std::span<const kernels::AttentionSeqDesc> seqs, const TensorView& q, const TensorView& gate,
                 const TensorView& out, kernels::AttentionMath math) override {
    record("attention", {q, gate, out}, {seqs.size()});
    inner_->attention(seqs, q, gate, out, math);
  }
  void gdn_gating(const TensorView& a, const TensorView& b, const TensorView& A_log, const TensorView& dt_bias,
                  const TensorView& g, const TensorView& beta) override {
    record("gdn_gating", {a, b, A_log, dt_bias, g, beta});
    inner_->gdn_gating(a, b, A_log, dt_bias, g, beta);
  }
  void gdn_sequences(const kernels::GdnDims& dims, const TensorView& conv_weight,
                     std::span<const kernels::GdnSeqDesc> seqs, const TensorView& x, const TensorView& g,
                     const TensorView& beta, const TensorView& qkv_out, const TensorView& core_out) override {
    record("gdn_sequences", {conv_weight, x, g, beta, qkv_out, core_out}, {seqs.size()});
    inner_->gdn_sequences(dims, conv_weight, seqs, x, g, beta, qkv_out, core_out);
  }
  void moe(const TensorView& x, const kernels::MoeHandle& m, const TensorView& out) override {
    record("moe", {x, out});
    inner_->moe(x, m, out);
  }
  void state_copy(std::span<const kernels::GdnStateRef> dst, std::span<const kernels::GdnStateRef> src,
                  const kernels::GdnDims& dims) override {
    record("state_copy", {}, {dst.size(), src.size()});
    inner_->state_copy(dst, src, dims);
  }
  void state_zero(std::span<const kernels::GdnStateRef> dst, const kernels::GdnDims& dims) override {
    record("state_zero", {}, {dst.size()});
    inner_->state_zero(dst, dims);
  }
  void gather_rows(const TensorView& x, std::span<const int64_t> rows, const TensorView& out) override {
    record("gather_rows", {x, out}, {rows.size()});
    inner_->gather_rows(x, rows, out);
  }
  void layernorm(const TensorView& x, const TensorView& w, const TensorView& b, float eps,
                 const TensorView& out) override {
    record("layernorm", {x, w, b, out});
    inner_->layernorm(x, w, b, eps, out);
  }
  void bias_activation(const TensorView& x, const TensorView& bias, kernels::Activation act,
                       const TensorView& out) override {
    record("bias_activation", {x, bias, out});
    inner_->bias_activation(x, bias, act, out);
  }
  void rope_table(const TensorView& x, const TensorView& cos, const TensorView& sin) override {
    record("rope_table", {x, cos, sin});
    inner_->rope_table(x, cos, sin);
  }
  void dense_attention(std::span<const kernels::DenseSegment> segments, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, kernels::AttentionMath math) override {
    record("dense_attention", {q, k, v, out}, {segments.size()});
    inner_->dense_attention(segments, q, k, v, out, math);
  }
  void sample(const TensorView& logits, std::span<const kernels::SampleRow> rows, const kernels::SamplingConfig& config,
              std::span<kernels::SampleResult> out) override {
    record("sample", {logits}, {rows.size(), out.size()});
    inner_->sample(logits, rows, config, out);
  }

 private:
  static std::string describe(const TensorView& t) {
    std::string s = fmt::format("{}:{}[", t.data, static_cast<int>(t.dtype));
    for (int d = 0; d < t.rank; ++d) s += fmt::format("{}{}/{}", d ? "," : "", t.dim(d), t.stride[static_cast<std::size_t>(d)]);
    return s + "]";
  }
  void record(const char* op, std::initializer_list<TensorView> tensors,
              std::initializer_list<std::size_t> spans = {}) {
    record_all(op, std::vector<TensorView>(tensors), spans);
  }
  void record_all(const char* op, const std::vector<TensorView>& tensors, std::initializer_list<std::size_t> spans) {
    if (!recording_) return;
    std::string s = op;
    s += "(";
    for (const TensorView& t : tensors) s += describe(t) + " ";
    for (std::size_t n : spans) s += fmt::format("#{} ", n);
    s += ")";
    recording_->push_back(std::move(s));
  }

  std::unique_ptr<kernels::Backend> inner_;
  std::vector<std::string>* recording_ = nullptr;
};

// The tiny BF16 model on a GraphRecordingBackend, loaded once per process.
struct RecordingModel {
  GraphRecordingBackend backend;
  std::shared_ptr<model::Qwen35MoeModel> model;
  RecordingModel() {
    const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";
    model = std::make_shared<model::Qwen35MoeModel>(
        std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string())), backend);
  }
};

inline RecordingModel& recording_model() {
  static RecordingModel m;
  return m;
}

}  // namespace fp4serve::engine::testing
