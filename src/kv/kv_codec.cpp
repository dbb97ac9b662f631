#include "kv/kv_codec.h"

#include <cstring>
#include <vector>

namespace brisk {

void encode_kv_head(KvType t, const float* x, int64_t d, uint8_t* out) {
  thread_local std::vector<float> r;
  if (kv_rotated(t)) {
    r.assign(x, x + d);
    kv_rotate(r.data(), d);
    x = r.data();
  }
  switch (t) {
    case KvType::f32: std::memcpy(out, x, static_cast<size_t>(d) * 4); break;
    case KvType::f16: codec::encode_f16(x, d, out); break;
    case KvType::int8: codec::encode_int8(x, d, out); break;
    case KvType::int4:
    case KvType::int4r:
    case KvType::kivi4: codec::encode_int4(x, d, out); break;
    case KvType::nsn2: codec::encode_nsn2(x, d, out); break;
  }
}

void decode_kv_head(KvType t, const uint8_t* in, int64_t d, float* out) {
  switch (t) {
    case KvType::f32: std::memcpy(out, in, static_cast<size_t>(d) * 4); break;
    case KvType::f16: codec::decode_f16(in, d, out); break;
    case KvType::int8: codec::decode_int8(in, d, out); break;
    case KvType::int4:
    case KvType::int4r:
    case KvType::kivi4: codec::decode_int4(in, d, out); break;
    case KvType::nsn2: codec::decode_nsn2(in, d, out); break;
  }
  if (kv_rotated(t)) kv_unrotate(out, d);
}

}  // namespace brisk
