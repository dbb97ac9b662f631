#include "kernels/dispatch.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace brisk {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

// clang's __builtin_cpu_supports does not know "f16c": ask CPUID (leaf 1, ECX bit 29).
static bool has_f16c() {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

Isa best_isa() {
  static const Isa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma") && has_f16c())
      return Isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        has_f16c())
      return Isa::avx2;
    return Isa::scalar;
  }();
  return best;
}

namespace {

Isa env_isa() {
  const char* e = std::getenv("BRISK_ISA");
  if (!e || !*e) return Isa::avx512;
  if (!std::strcmp(e, "scalar")) return Isa::scalar;
  if (!std::strcmp(e, "avx2")) return Isa::avx2;
  if (!std::strcmp(e, "avx512")) return Isa::avx512;
  fail("BRISK_ISA={} is not one of scalar, avx2, avx512", e);
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{static_cast<int>(env_isa() < best_isa() ? env_isa() : best_isa())};
  return slot;
}

struct Tables {
  KernelTable t[3];
  Tables() {
    for (int i = 0; i < 3; ++i) t[i] = KernelTable{static_cast<Isa>(i), {}, {}, nullptr, nullptr, {}, {}, nullptr, nullptr, nullptr, nullptr};
    fill_scalar_kernels(t[0]);
    t[1] = t[0];
    t[1].isa = Isa::avx2;
    // Each ISA overrides what it has; the rest stays from the level below. Tables above
    // best_isa() are never filled (nor handed out), so no unsupported code is touched.
    if (best_isa() >= Isa::avx2) fill_avx2_kernels(t[1]);
    t[2] = t[1];
    t[2].isa = Isa::avx512;
    if (best_isa() >= Isa::avx512) fill_avx512_kernels(t[2]);
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

void set_isa(Isa isa) {
  if (isa > best_isa()) isa = best_isa();
  active_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
}

const KernelTable& kernel_table() { return tables().t[static_cast<int>(active_isa())]; }

const KernelTable& kernel_table(Isa isa) {
  if (isa > best_isa()) fail("ISA {} is not supported by this CPU", isa_name(isa));
  return tables().t[static_cast<int>(isa)];
}

}  // namespace brisk
