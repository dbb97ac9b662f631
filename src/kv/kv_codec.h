// The KV codecs' encoders and plain reference decoders (layouts: kernels/kv_format.h).
// KvCache encodes every K/V head vector it stores with encode_kv_head(); the attention
// kernel decodes the bytes itself, and tests check it against decode_kv_head().
#pragma once
#include <cstdint>

#include "kernels/kv_format.h"

namespace brisk {

// x: head_dim floats -> out: kv_head_bytes(t, head_dim) bytes. Rotated codecs rotate first.
// kivi4 here is its V layout (int4 per token); its K goes through encode_kivi_k.
void encode_kv_head(KvType t, const float* x, int64_t head_dim, uint8_t* out);
// The inverse (up to the codec's error), un-rotated: what the cache stands for.
void decode_kv_head(KvType t, const uint8_t* in, int64_t head_dim, float* out);

// One codec per file (kv/codec_*.cpp); x already rotated where the codec wants it.
namespace codec {
void encode_f16(const float* x, int64_t d, uint8_t* out);
void decode_f16(const uint8_t* in, int64_t d, float* out);
void encode_int8(const float* x, int64_t d, uint8_t* out);
void decode_int8(const uint8_t* in, int64_t d, float* out);
void encode_int4(const float* x, int64_t d, uint8_t* out);
void decode_int4(const uint8_t* in, int64_t d, float* out);
void encode_nsn2(const float* x, int64_t d, uint8_t* out);
void decode_nsn2(const uint8_t* in, int64_t d, float* out);
}  // namespace codec

// kivi4 K (kernels/kv_format.h): one KV head over a group of kKiviGroup positions, row r at
// rows + r * stride -> kivi_k_group_bytes(d) bytes, each channel quantized over the group.
int64_t kivi_k_group_bytes(int64_t d);
void encode_kivi_k(const float* rows, int64_t stride, int64_t d, uint8_t* out);
// Row r of such a group (the plain reference; the attention kernel decodes it itself).
void decode_kivi_k(const uint8_t* group, int64_t r, int64_t d, float* out);

}  // namespace brisk
