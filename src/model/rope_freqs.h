// The rotation frequencies of RoPE for one head: inv_freq[i] = base^(-2i/head_dim),
// divided by a per-frequency factor when the model carries one (rope_freqs.weight: how
// llama.cpp's GGUF files, and our HF loader, express Llama-3 style rope scaling).
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

// `divisors` is empty or has head_dim / 2 entries.
std::vector<float> rope_inv_freq(float base, int64_t head_dim, const std::vector<float>& divisors);

}  // namespace brisk
