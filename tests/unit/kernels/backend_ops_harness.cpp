#include "backend_ops_harness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "kernels/cpu/cpu_backend.h"
#if defined(FP4SERVE_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif
#include "kernels/cpu/cpu_features.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels::test::ops {
namespace {

using cpu::Isa;

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// The CPU backend on `isa`: only `linear` differs between tiers, and only from avx512_bf16 up.
BackendSpec cpu_column(Isa isa) {
  return {"cpu " + std::string(cpu::isa_name(isa)), [isa] { return std::make_unique<cpu::CpuBackend>(isa); },
          [isa](OpClass c) { return c != OpClass::kMatmul || isa < Isa::kAvx512Bf16; }};
}

// ---- registration point: device backends ------------------------------------------------------
// One entry per device backend: its name, a factory that returns nullptr when no device is present
// (the column is then reported as skipped), and what it must reproduce bit for bit (a GPU: data
// movement only; everything else is held to the per-op NMSE thresholds). FP4SERVE_REQUIRE_CUDA=1 (the
// "gpu"-labelled run, scripts/gpu-check.sh) turns a missing device into a failure instead of a skip.
std::vector<BackendSpec> device_backends() {
  return {
#if defined(FP4SERVE_HAVE_CUDA)
      {"cuda",
       [] {
         auto b = cuda::make_cuda_backend_if_present();
         if (!b && env_flag("FP4SERVE_REQUIRE_CUDA"))
           throw std::runtime_error("FP4SERVE_REQUIRE_CUDA=1 but no CUDA device is usable");
         return b;
       },
       [](OpClass c) { return c == OpClass::kMove; }},
#endif
  };
}

std::string format_double(double v) {
  char buf[32];
  if (v == 0) return "0";
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

struct Row {
  std::string backend, output, nmse, max_nmse, bits, verdict;
};

void print_table(const Case& c, uint32_t seed, double seconds, const std::vector<Row>& rows) {
  std::printf("  %s(%s) seed=%u (%.0f ms on all backends)\n", c.op.c_str(), c.shape.c_str(), seed, seconds * 1e3);
  for (const Row& r : rows)
    std::printf("    %-18s %-10s nmse=%-10s max=%-8s %-22s %s\n", r.backend.c_str(), r.output.c_str(), r.nmse.c_str(),
                r.max_nmse.c_str(), r.bits.c_str(), r.verdict.c_str());
  std::fflush(stdout);
}

}  // namespace

std::vector<BackendSpec> backends_under_test() {
  std::vector<BackendSpec> out;
  // Every CPU tier this machine runs, up to the one FP4SERVE_CPU_ISA caps the process at.
  for (Isa isa : cpu::supported_isas())
    if (isa <= cpu::active_isa()) out.push_back(cpu_column(isa));
  for (BackendSpec& d : device_backends()) out.push_back(std::move(d));
  return out;
}

double nmse(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return INFINITY;
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double a = out[i], b = ref[i];
    if (std::isnan(a) || std::isnan(b)) {
      if (std::isnan(a) != std::isnan(b)) return INFINITY;
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      if (a != b) return INFINITY;
      continue;
    }
    err += (a - b) * (a - b);
    norm += b * b;
  }
  if (err == 0) return 0;
  return norm == 0 ? INFINITY : err / norm;
}

uint32_t Harness::seed_for(const std::string& op, const std::string& shape) {
  uint32_t h = 2166136261u;  // FNV-1a over "op|shape"
  for (char ch : op + "|" + shape) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
  if (const char* s = std::getenv("FP4SERVE_BACKEND_OPS_SEED"); s != nullptr && *s != '\0')
    h ^= static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) * 2654435761u;
  return h;
}

Harness::Harness() : reference_(std::make_unique<cpu::CpuBackend>(Isa::kScalar)) {
  for (BackendSpec& spec : backends_under_test()) {
    std::unique_ptr<Backend> b = spec.make();
    if (b == nullptr) {
      std::printf("[backend_ops] %s: no device, column skipped\n", spec.name.c_str());
      continue;
    }
    columns_.push_back({std::move(spec), std::move(b)});
  }
}

Harness::~Harness() = default;

void Harness::check(const Case& c) {
  const uint32_t seed = seed_for(c.op, c.shape);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Output> ref;
  try {
    ref = c.run(*reference_, seed);
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.op << "(" << c.shape << ") seed=" << seed << ": the reference threw: " << e.what();
    return;
  }
  std::vector<Row> rows;
  bool failed = false;
  for (Column& col : columns_) {
    std::vector<Output> got;
    try {
      got = c.run(*col.backend, seed);
    } catch (const std::exception& e) {
      rows.push_back({col.spec.name, "-", "-", format_double(c.max_nmse), "-", std::string("FAIL: threw ") + e.what()});
      failed = true;
      continue;
    }
    if (got.size() != ref.size()) {
      rows.push_back({col.spec.name, "-", "-", "-", "-", "FAIL: wrong number of outputs"});
      failed = true;
      continue;
    }
    const bool exact_required = col.spec.bit_exact(c.cls);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double e = nmse(got[i].values, ref[i].values);
      const bool same = got[i].bytes == ref[i].bytes;
      const bool ok = e <= c.max_nmse && (same || !exact_required);
      failed |= !ok;
      rows.push_back({col.spec.name, ref[i].name, format_double(e), format_double(c.max_nmse),
                      std::string(same ? "bits same" : "bits differ") + (exact_required ? " (required)" : ""),
                      ok ? "OK" : "FAIL"});
    }
  }
  if (failed || env_flag("FP4SERVE_BACKEND_OPS_TABLE"))
    print_table(c, seed, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), rows);
  if (failed)
    ADD_FAILURE() << c.op << "(" << c.shape << ") seed=" << seed
                  << ": a backend is off the reference (table above; FP4SERVE_BACKEND_OPS_SEED mixes into seeds)";
}

DeviceTensor alloc(Backend& b, DType dtype, std::initializer_list<int64_t> shape, const char* what) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  DeviceTensor t;
  t.buffer = b.allocate(static_cast<std::size_t>(n) * dtype_size(dtype), what);
  t.view = t.buffer.view(dtype, shape);
  return t;
}

DeviceTensor upload(Backend& b, DType dtype, std::initializer_list<int64_t> shape, const void* host, std::size_t bytes,
                    const char* what) {
  DeviceTensor t = alloc(b, dtype, shape, what);
  if (t.view.bytes() != bytes) throw std::logic_error(std::string("upload ") + what + ": host size differs from shape");
  b.upload(t.view, host);
  return t;
}

TensorView prepared(Backend& b, DType dtype, std::initializer_list<int64_t> shape, const void* host) {
  return b.prepare_tensor(TensorView::contiguous(const_cast<void*>(host), dtype, shape));
}

TensorView columns_of(const TensorView& m, int64_t c0, int64_t cols, int64_t r0, int64_t n) {
  if (m.rank != 2 || c0 < 0 || c0 + cols > m.dim(1)) throw std::logic_error("columns_of: outside the matrix");
  TensorView v = m.rows(r0, n < 0 ? m.dim(0) - r0 : n);
  v.data = static_cast<char*>(v.data) + static_cast<std::size_t>(c0) * v.element_size();
  v.shape[1] = cols;
  return v;
}

Output download(Backend& b, const TensorView& v, const std::string& name, float e4m3_scale) {
  Output o;
  o.name = name;
  o.bytes.resize(v.bytes());
  b.synchronize();
  b.download(o.bytes.data(), v);
  const std::size_t n = static_cast<std::size_t>(v.numel());
  o.values.resize(n);
  const uint8_t* p = o.bytes.data();
  for (std::size_t i = 0; i < n; ++i) {
    switch (v.dtype) {
      case DType::kBF16: {
        uint16_t x;
        std::memcpy(&x, p + 2 * i, 2);
        o.values[i] = bf16_to_f32(x);
        break;
      }
      case DType::kF32: {
        float x;
        std::memcpy(&x, p + 4 * i, 4);
        o.values[i] = x;
        break;
      }
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p + 4 * i, 4);
        o.values[i] = x;
        break;
      }
      case DType::kI64: {
        int64_t x;
        std::memcpy(&x, p + 8 * i, 8);
        o.values[i] = static_cast<double>(x);
        break;
      }
      case DType::kU8:
      case DType::kF8E4M3:
        o.values[i] = static_cast<double>(e4m3_to_f32(p[i])) * e4m3_scale;
        break;
      default:
        throw std::logic_error("download: no decoder for " + std::string(dtype_name(v.dtype)));
    }
  }
  return o;
}

bool same_bytes(const Output& a, std::size_t a_offset, const Output& b, std::size_t b_offset, std::size_t n,
                const std::string& what) {
  if (a_offset + n > a.bytes.size() || b_offset + n > b.bytes.size()) {
    ADD_FAILURE() << what << ": range outside the outputs";
    return false;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (a.bytes[a_offset + i] != b.bytes[b_offset + i]) {
      ADD_FAILURE() << what << ": first differing byte " << i << " of " << n << " (" << a.name << ")";
      return false;
    }
  return true;
}

}  // namespace fp4serve::kernels::test::ops
