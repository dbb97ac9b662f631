// Prefix-cache identity of a full KV block: the hash of its tokens chained with the hash
// of every token before it (the parent block's hash), so equal hashes mean equal prefixes
// (vLLM automatic prefix caching; SGLang RadixAttention keeps a tree instead). XXH3-64.
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

// The hash of a chain with no block before the first.
inline constexpr uint64_t kRootBlockHash = 0x9e3779b97f4a7c15ull;

uint64_t hash_block(uint64_t parent, const int32_t* tokens, int64_t n);

// Hashes of the full blocks of `tokens` (floor(size / block_size) of them), chained.
std::vector<uint64_t> hash_full_blocks(const std::vector<int32_t>& tokens, int64_t block_size);

}  // namespace brisk
