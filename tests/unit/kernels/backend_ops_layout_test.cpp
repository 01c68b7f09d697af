// Row-strided views on every backend (tensor_view.h: a matrix view's rows may be strided unless the op
// says otherwise): each op that takes [rows, cols] matrices runs once on contiguous views and once on
// the same numbers placed as column ranges of wider buffers. The backend must either give the same
// bits without touching the bytes around the views, or reject the views with std::invalid_argument;
// reading them as if contiguous is the failure this test exists for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/gdn_cpu.h"

namespace fp4serve::kernels::test::ops {
namespace {

constexpr int64_t kLeft = 8, kRight = 16;  // padding columns around a strided view
constexpr uint8_t kSentinel = 0x5A;

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A [rows, cols] matrix on a backend: contiguous, or columns kLeft .. kLeft + cols of a wider buffer
// whose other bytes hold the sentinel.
struct Placed {
  DeviceTensor buffer;
  TensorView view;
  bool strided = false;
};

Placed place(Backend& b, DType dt, int64_t rows, int64_t cols, const std::vector<uint8_t>& host, bool strided) {
  const std::size_t es = dtype_size(dt), row = static_cast<std::size_t>(cols) * es;
  if (host.size() != static_cast<std::size_t>(rows) * row) throw std::logic_error("place: size differs from shape");
  Placed p;
  p.strided = strided;
  if (!strided) {
    p.buffer = upload(b, dt, {rows, cols}, host.data(), host.size(), "matrix");
    p.view = p.buffer.view;
    return p;
  }
  const int64_t width = kLeft + cols + kRight;
  std::vector<uint8_t> full(static_cast<std::size_t>(rows * width) * es, kSentinel);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(full.data() + (static_cast<std::size_t>(r * width + kLeft)) * es, host.data() + r * row, row);
  p.buffer = upload(b, dt, {rows, width}, full.data(), full.size(), "wide matrix");
  p.view = columns_of(p.buffer.view, kLeft, cols);
  return p;
}

// The matrix's bytes row by row; throws when a byte around a strided view changed.
Output read(Backend& b, const Placed& p, const std::string& name) {
  const Output all = download(b, p.buffer.view, name);
  if (!p.strided) return all;
  const std::size_t es = p.view.element_size(), row = static_cast<std::size_t>(p.view.dim(1)) * es;
  const std::size_t width = static_cast<std::size_t>(p.buffer.view.dim(1)) * es, left = kLeft * es;
  Output o;
  o.name = name;
  for (std::size_t r = 0; r < static_cast<std::size_t>(p.view.dim(0)); ++r) {
    const uint8_t* line = all.bytes.data() + r * width;
    for (std::size_t i = 0; i < width; ++i)
      if ((i < left || i >= left + row) && line[i] != kSentinel)
        throw std::runtime_error(cat(name, ": byte ", i, " of row ", r, " outside the view was written"));
    o.bytes.insert(o.bytes.end(), line + left, line + left + row);
  }
  return o;
}

struct LayoutCase {
  std::string op;
  std::function<std::vector<Output>(Backend&, bool strided)> run;
};

void check_layouts(const LayoutCase& c) {
  Harness h;
  for (Harness::Column& col : h.columns()) {
    Backend& b = *col.backend;
    const std::vector<Output> plain = c.run(b, false);
    std::vector<Output> strided;
    try {
      strided = c.run(b, true);
    } catch (const std::invalid_argument& e) {
      std::printf("[backend_ops] %s %s: rejects row-strided views (%s)\n", col.spec.name.c_str(), c.op.c_str(),
                  e.what());
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << col.spec.name << " " << c.op << " on row-strided views: " << e.what();
      continue;
    }
    ASSERT_EQ(strided.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i)
      same_bytes(strided[i], 0, plain[i], 0, plain[i].bytes.size(),
                 cat(col.spec.name, " ", c.op, " (", plain[i].name, "): row-strided views vs contiguous"));
  }
}

std::vector<uint8_t> random_bf16_bytes(int64_t n, uint32_t seed, float scale = 1.0f) {
  return bytes_of(to_bf16(random_f32(n, seed, scale)));
}

TEST(BackendOpsLayout, Embedding) {
  check_layouts({"embedding out", [](Backend& b, bool s) {
                   const int64_t V = 30, H = 40, T = 5;
                   const auto table = to_bf16(random_f32(V * H, 1));
                   DeviceTensor ids = upload(b, DType::kI32, {T}, std::vector<int32_t>{3, 0, 29, 3, 7}, "ids");
                   Placed out = place(b, DType::kBF16, T, H, std::vector<uint8_t>(T * H * 2), s);
                   b.embedding(prepared(b, DType::kBF16, {V, H}, table.data()), ids.view, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, RmsNorm) {
  check_layouts({"rmsnorm", [](Backend& b, bool s) {
                   const int64_t R = 4, D = 64;
                   const auto w = random_bf16_values(D, 2, 0.5f);
                   Placed x = place(b, DType::kBF16, R, D, random_bf16_bytes(R * D, 3), s);
                   Placed out = place(b, DType::kBF16, R, D, std::vector<uint8_t>(R * D * 2), s);
                   b.rmsnorm(x.view, prepared(b, DType::kF32, {D}, w.data()), 1e-6f, NormKind::kOnePlus, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, RmsNormGated) {
  check_layouts({"rmsnorm_gated", [](Backend& b, bool s) {
                   const int64_t R = 4, D = 40;
                   const auto w = random_bf16_values(D, 4, 0.5f);
                   Placed x = place(b, DType::kBF16, R, D, random_bf16_bytes(R * D, 5), s);
                   Placed z = place(b, DType::kBF16, R, D, random_bf16_bytes(R * D, 6), s);
                   Placed out = place(b, DType::kBF16, R, D, std::vector<uint8_t>(R * D * 2), s);
                   b.rmsnorm_gated(x.view, z.view, prepared(b, DType::kF32, {D}, w.data()), 1e-6f, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, ResidualAdd) {
  check_layouts({"residual_add", [](Backend& b, bool s) {
                   const int64_t R = 5, H = 48;
                   Placed x = place(b, DType::kBF16, R, H, random_bf16_bytes(R * H, 7), s);
                   Placed y = place(b, DType::kBF16, R, H, random_bf16_bytes(R * H, 8), s);
                   b.residual_add(x.view, y.view);
                   return std::vector<Output>{read(b, x, "x")};
                 }});
}

TEST(BackendOpsLayout, GatherRowsOut) {
  check_layouts({"gather_rows out", [](Backend& b, bool s) {
                   const int64_t R = 6, H = 32;
                   DeviceTensor x = upload(b, DType::kBF16, {R, H}, to_bf16(random_f32(R * H, 9)), "x");
                   const std::vector<int64_t> rows = {5, 0, 2};
                   Placed out = place(b, DType::kBF16, 3, H, std::vector<uint8_t>(3 * H * 2), s);
                   b.gather_rows(x.view, rows, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, ToBf16) {
  check_layouts({"to_bf16", [](Backend& b, bool s) {
                   const int64_t R = 3, C = 20;
                   Placed x = place(b, DType::kF32, R, C, bytes_of(random_f32(R * C, 10)), s);
                   Placed out = place(b, DType::kBF16, R, C, std::vector<uint8_t>(R * C * 2), s);
                   b.to_bf16(x.view, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, LayerNorm) {
  check_layouts({"layernorm", [](Backend& b, bool s) {
                   const int64_t R = 4, D = 72;
                   const auto w = random_bf16_values(D, 21, 0.5f), bias = random_bf16_values(D, 22, 0.1f);
                   Placed x = place(b, DType::kBF16, R, D, random_bf16_bytes(R * D, 23), s);
                   Placed out = place(b, DType::kBF16, R, D, std::vector<uint8_t>(R * D * 2), s);
                   b.layernorm(x.view, prepared(b, DType::kF32, {D}, w.data()), prepared(b, DType::kF32, {D}, bias.data()),
                               1e-6f, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, BiasActivation) {
  check_layouts({"bias_activation", [](Backend& b, bool s) {
                   const int64_t R = 3, N = 40;
                   const auto bias = random_bf16_values(N, 24, 0.5f);
                   Placed x = place(b, DType::kF32, R, N, bytes_of(random_f32(R * N, 25, 2.0f)), s);
                   Placed out = place(b, DType::kBF16, R, N, std::vector<uint8_t>(R * N * 2), s);
                   b.bias_activation(x.view, prepared(b, DType::kF32, {N}, bias.data()), Activation::kGeluErf, out.view);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, GdnGating) {
  check_layouts({"gdn_gating", [](Backend& b, bool s) {
                   const int64_t T = 3, Hv = 8;
                   const auto A_log = random_bf16_values(Hv, 11), dt = random_bf16_values(Hv, 12);
                   Placed a = place(b, DType::kF32, T, Hv, bytes_of(random_bf16_values(T * Hv, 13, 4.0f)), s);
                   Placed bb = place(b, DType::kF32, T, Hv, bytes_of(random_bf16_values(T * Hv, 14)), s);
                   Placed g = place(b, DType::kF32, T, Hv, std::vector<uint8_t>(T * Hv * 4), s);
                   Placed beta = place(b, DType::kF32, T, Hv, std::vector<uint8_t>(T * Hv * 4), s);
                   b.gdn_gating(a.view, bb.view, prepared(b, DType::kF32, {Hv}, A_log.data()),
                                prepared(b, DType::kF32, {Hv}, dt.data()), g.view, beta.view);
                   return std::vector<Output>{read(b, g, "g"), read(b, beta, "beta")};
                 }});
}

TEST(BackendOpsLayout, AttentionGateAndOut) {
  check_layouts({"attention gate/out", [](Backend& b, bool s) {
                   const int Hq = 2, Hkv = 1, D = 32;
                   const int64_t T = 3;
                   DeviceTensor kc = alloc(b, DType::kBF16, {T, Hkv, D}, "k cache"),
                                vc = alloc(b, DType::kBF16, {T, Hkv, D}, "v cache");
                   KvView kv;
                   kv.k = kc.view.data, kv.v = vc.view.data, kv.capacity = T, kv.n_kv_heads = Hkv, kv.head_dim = D;
                   const AttentionSeqDesc seq{{0, T, 0}, kv};
                   DeviceTensor k = upload(b, DType::kBF16, {T, Hkv, D}, to_bf16(random_f32(T * Hkv * D, 15)), "k");
                   DeviceTensor v = upload(b, DType::kBF16, {T, Hkv, D}, to_bf16(random_f32(T * Hkv * D, 16)), "v");
                   b.kv_write({&seq, 1}, k.view, v.view);
                   DeviceTensor q = upload(b, DType::kBF16, {T, Hq, D}, to_bf16(random_f32(T * Hq * D, 17)), "q");
                   Placed gate = place(b, DType::kBF16, T, Hq * D, random_bf16_bytes(T * Hq * D, 18), s);
                   Placed out = place(b, DType::kBF16, T, Hq * D, std::vector<uint8_t>(T * Hq * D * 2), s);
                   b.attention({&seq, 1}, q.view, gate.view, out.view, AttentionMath::kHfEager);
                   return std::vector<Output>{read(b, out, "out")};
                 }});
}

TEST(BackendOpsLayout, GdnSequence) {
  check_layouts({"gdn_sequence x/qkv/core", [](Backend& b, bool s) {
                   GdnDims d;
                   d.Hk = 1, d.Hv = 2, d.dk = 16, d.dv = 16, d.conv_kernel = 4;
                   const int64_t T = 3, C = d.conv_dim(), Vd = d.value_dim();
                   const auto w = to_bf16(random_f32(C * d.conv_kernel, 19, 0.5f));
                   DeviceTensor conv = alloc(b, DType::kBF16, {d.conv_state_elems()}, "conv state");
                   DeviceTensor ssm = alloc(b, DType::kF32, {d.state_elems()}, "ssm state");
                   std::vector<float> g(T * d.Hv, -0.2f), beta(T * d.Hv, 0.5f);
                   DeviceTensor gd = upload(b, DType::kF32, {T, d.Hv}, g, "g"),
                                bd = upload(b, DType::kF32, {T, d.Hv}, beta, "beta");
                   Placed x = place(b, DType::kBF16, T, C, random_bf16_bytes(T * C, 20), s);
                   Placed qkv = place(b, DType::kBF16, T, C, std::vector<uint8_t>(T * C * 2), s);
                   Placed core = place(b, DType::kBF16, T, Vd, std::vector<uint8_t>(T * Vd * 2), s);
                   b.gdn_sequence(d, prepared(b, DType::kBF16, {C, d.conv_kernel}, w.data()),
                                  {{0, T, 0}, {conv.view.as<uint16_t>(), ssm.view.as<float>()}}, x.view, gd.view,
                                  bd.view, qkv.view, core.view);
                   return std::vector<Output>{read(b, qkv, "qkv out"), read(b, core, "core out")};
                 }});
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
