#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace fp4serve::kernels::cpu {
namespace {

uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Linux: AMX tile data is a dynamically enabled state; a process must ask for it before the first
// tile instruction (else SIGILL). ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18.
bool request_amx_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  f.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  if (f.logical_cores <= 0) f.logical_cores = 1;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool fma = (c >> 12) & 1;
  const bool f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;            // SSE + AVX state
  const bool zmm_os = (xcr0 & 0xE6) == 0xE6;          // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool amx_os = (xcr0 & (3ull << 17)) == (3ull << 17);  // XTILECFG + XTILEDATA
  if (!ymm_os) return f;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  f.fma = fma;
  f.f16c = f16c;
  if (zmm_os) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vbmi = (c >> 1) & 1;
  }
  f.amx_bf16 = amx_os && ((d >> 22) & 1);
  f.amx_tile = amx_os && ((d >> 24) & 1);
  unsigned a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx512_bf16 = zmm_os && ((a1 >> 5) & 1);
  if (f.amx_tile) f.amx_permitted = request_amx_permission();
  return f;
}

std::once_flag g_once;
std::atomic<int> g_active{-1};

Isa best_isa() {
  if (isa_supported(Isa::kAmx)) return Isa::kAmx;
  if (isa_supported(Isa::kAvx512Bf16)) return Isa::kAvx512Bf16;
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    int64_t best = 0;
    for (int idx = 0; idx < 8; ++idx) {
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size");
      std::string v;
      if (!(f >> v) || v.empty()) continue;
      int64_t n = std::atoll(v.c_str());
      if (v.back() == 'K') n <<= 10;
      if (v.back() == 'M') n <<= 20;
      best = std::max(best, n);
    }
    return best;
  }();
  return bytes;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512:
      return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
    case Isa::kAvx512Bf16:
      return isa_supported(Isa::kAvx512) && f.avx512_bf16;
    case Isa::kAmx:
      return isa_supported(Isa::kAvx512Bf16) && f.avx512vbmi && f.amx_tile && f.amx_bf16 && f.amx_permitted;
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    if (isa_supported(i)) out.push_back(i);
  return out;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512_bf16";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

Isa parse_isa(std::string_view name) {
  if (name == "scalar") return Isa::kScalar;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  if (name == "avx512_bf16") return Isa::kAvx512Bf16;
  if (name == "amx") return Isa::kAmx;
  throw std::invalid_argument("unknown CPU ISA '" + std::string(name) +
                              "' (expected scalar, avx2, avx512, avx512_bf16 or amx)");
}

void set_active_isa(Isa isa) {
  if (!isa_supported(isa))
    throw std::runtime_error("CPU kernel path '" + std::string(isa_name(isa)) +
                             "' is not supported by this CPU (" + describe_cpu() + ")");
  g_active.store(static_cast<int>(isa));
}

Isa active_isa() {
  int v = g_active.load(std::memory_order_relaxed);
  if (v >= 0) return static_cast<Isa>(v);
  std::call_once(g_once, [] {
    if (g_active.load() >= 0) return;
    Isa chosen = best_isa();
    if (const char* env = std::getenv("FP4SERVE_CPU_ISA"); env != nullptr && *env != '\0') {
      Isa want = parse_isa(env);
      if (!isa_supported(want))
        throw std::runtime_error("FP4SERVE_CPU_ISA=" + std::string(env) +
                                 " asks for a path this CPU cannot run");
      chosen = want;
    }
    g_active.store(static_cast<int>(chosen));
  });
  return static_cast<Isa>(g_active.load());
}

std::string describe_cpu() {
  const CpuFeatures& f = cpu_features();
  std::string s = "cpu: " + std::to_string(f.logical_cores) + " logical cores;";
  auto add = [&](bool on, const char* name) {
    if (on) {
      s += ' ';
      s += name;
    }
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512vbmi, "avx512vbmi");
  add(f.amx_tile, "amx_tile");
  add(f.amx_bf16, "amx_bf16");
  if (f.amx_tile) s += f.amx_permitted ? " (amx permitted)" : " (amx NOT permitted by the OS)";
  return s;
}

}  // namespace fp4serve::kernels::cpu
