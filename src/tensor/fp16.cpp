// Portable half and bfloat16 conversions by bit manipulation, so results never depend on
// the host's F16C support or rounding mode.
#include <cstring>

#include "tensor/quant.h"

namespace brisk {

namespace {
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Shifts v right by s (1..31) rounding to nearest, ties to even.
uint32_t shift_rne(uint32_t v, int s) {
  uint32_t r = v >> s, rem = v & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (r & 1))) ++r;
  return r;
}
}  // namespace

float fp16_to_fp32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * 0x1p-24f;
    return from_bits(bits(v) | sign);
  }
  if (exp == 31) return from_bits(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  return from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16(float f) {
  uint32_t u = bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u)  // NaN: keep the top payload bits, force quiet so it stays a NaN
    return static_cast<uint16_t>(sign | 0x7E00 | ((a >> 13) & 0x3FF));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00);  // >= 65520 rounds to inf
  uint32_t e = a >> 23;
  if (e < 113) {  // below 2^-14: half subnormal m * 2^-24, m = value * 2^24 rounded
    if (e == 0) return sign;  // float subnormals are far below half's range
    uint32_t m24 = (a & 0x7FFFFF) | 0x800000;  // value = m24 * 2^(e-150)
    int s = 126 - static_cast<int>(e);          // value * 2^24 = m24 >> s
    if (s >= 32) return sign;
    return static_cast<uint16_t>(sign | shift_rne(m24, s));  // may carry into min normal
  }
  uint32_t h = ((e - 112) << 10) | ((a & 0x7FFFFF) >> 13);
  uint32_t rem = a & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // carry may bump the exponent
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_fp32(uint16_t h) { return from_bits(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  uint32_t u = bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace brisk
