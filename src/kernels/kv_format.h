// How one KV head vector (head_dim numbers of one position) is stored in the KV cache:
// the KV codecs' byte layouts, shared by their encoders (kv/kv_codec.h) and the attention
// kernel, which decodes them itself (kernels/attention.h) so no dequantized copy of the
// cache ever exists.
//
//   f32    head_dim floats (the exact path, the default)
//   f16    head_dim IEEE halves
//   int8   symmetric per group of 32 numbers: [groups x half scale][head_dim x int8]
//   int4   asymmetric per group of 32 (KIVI, arXiv 2402.02750, 4-bit groups; here per token
//          for both K and V, see docs/techniques.md): [groups x (half scale, half min)]
//          [head_dim / 2 bytes, element 2i in the low nibble]
//   int4r  int4 of the vector rotated by R = H D / sqrt(head_dim) (a Walsh-Hadamard
//          transform H after fixed random signs D, as TurboQuant, arXiv 2504.19874, rotates
//          before quantizing): the rotation spreads outlier channels over all coordinates.
//   kivi4  KIVI (Liu et al., arXiv 2402.02750) as the paper has it: K per channel, V per
//          token. V: the int4 layout. K: each group of kKiviGroup consecutive positions of a
//          block (block_size a multiple of it, or one block per slot) is stored, per KV head,
//          as [head_dim x (half scale, half min)][kKiviGroup x head_dim / 2 bytes], so
//          every channel has its own range over the group's tokens (K's outliers sit in
//          fixed channels). The newest positions, until their group is complete, stay
//          exact in the cache's residual rows (KvSeqView::k_residual), as in KIVI. Same
//          bytes per position as int4.
//   nsn2   2-bit vector quantization after NSNQuant (arXiv 2505.18231): the rotated vector
//          in sub-vectors of 8, each stored as 8 sign bits and the index of the nearest of
//          256 magnitude codewords (one universal codebook, k-means on |N(0, I_8)| samples),
//          plus one float scale: [float scale][head_dim / 8 x (uint8 signs, uint8 index)].
//
// Rotated codecs store R x; since R is orthogonal, q . k = (R q) . (R k) and
// sum_p w_p v_p = R^T sum_p w_p (R v_p), so attention rotates the query once and un-rotates
// the output once instead of touching every cached position.
#pragma once
#include <cstdint>
#include <string>

namespace brisk {

enum class KvType : uint8_t { f32, f16, int8, int4, int4r, nsn2, kivi4 };

constexpr int64_t kKvGroup = 32;   // numbers per int8 / int4 scale group
constexpr int64_t kNsnSub = 8;     // numbers per nsn2 sub-vector
constexpr int64_t kKiviGroup = 32; // positions per kivi4 K group
// Exact K rows a kivi4 sequence keeps (at row position % kKiviResidual): its open group and
// the last one closed, so a speculative rollback into that one finds its exact rows again.
constexpr int64_t kKiviResidual = 2 * kKiviGroup;
constexpr int64_t kKiviMaxDim = 512;  // largest head_dim kivi4 takes (kernel scratch)
constexpr int64_t kNsnCodes = 256; // nsn2 codewords

// "f32", "f16", "int8", "int4", "int4r", "nsn2", "kivi4".
const char* kv_type_name(KvType t);
// Throws brisk::Error naming the accepted spellings.
KvType parse_kv_type(const std::string& name);
// Bytes of one head vector (kivi4: per position, its K group's bytes / kKiviGroup); throws brisk::Error when head_dim does not suit the codec
// (a multiple of 32 for int8/int4, a power of two for the rotated ones).
int64_t kv_head_bytes(KvType t, int64_t head_dim);
bool kv_rotated(KvType t);

// x <- R x and x <- R^T x for R = H D / sqrt(d) (d a power of two, at most 4096).
void kv_rotate(float* x, int64_t d);
void kv_unrotate(float* x, int64_t d);

// The nsn2 codebook: kNsnCodes x kNsnSub non-negative floats, built once (deterministic).
const float* nsn2_codebook();

}  // namespace brisk
