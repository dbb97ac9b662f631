// The KV codecs' encoders and plain reference decoders (layouts: kernels/kv_format.h).
// KvCache encodes every K/V head vector it stores with encode_kv_head(); the attention
// kernel decodes the bytes itself, and tests check it against decode_kv_head().
#pragma once
#include <cstdint>

#include "kernels/kv_format.h"

namespace brisk {

// x: head_dim floats -> out: kv_head_bytes(t, head_dim) bytes. Rotated codecs rotate first.
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

}  // namespace brisk
