// GGUF-exact block layouts of the quantized types brisk computes with. The byte order of
// every field is what llama.cpp writes, so these structs can be laid over mapped file data.
#pragma once
#include <cstdint>

namespace brisk {

constexpr int kQK = 32;    // elements per block of the *_0 types
constexpr int kQK_K = 256; // elements per K-quant super-block

// 32 values: x = q * d, q int8.
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[32];
};

// 32 values: x = (q - 8) * d; byte j holds element j (low nibble) and j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};

// 256 values in 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in [0, 15].
// scales[12] packs eight 6-bit sc and eight 6-bit m (see q4k_scale_min). qs: each group of
// 64 elements uses 32 bytes; low nibbles are elements 0..31 of the group, high 32..63.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};

// 256 values in 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6 bits.
// Per half of 128 elements: ql[64] low nibbles, qh[32] high 2-bit pairs (see dequantizer).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);

// Sub-block j (0..7) of a Q4_K: sub-blocks 0..3 keep their 6 bits in the low bits of bytes
// j (scale) and j+4 (min); sub-blocks 4..7 keep low 4 bits in byte j+4 (scale low nibble,
// min high nibble) and their top 2 bits in the top bits of bytes j-4 (scale) and j (min).
inline void q4k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

}  // namespace brisk
