#include "kv/block_hash.h"

#include <xxhash.h>

namespace brisk {

uint64_t hash_block(uint64_t parent, const int32_t* tokens, int64_t n) {
  return XXH3_64bits_withSeed(tokens, static_cast<size_t>(n) * sizeof(int32_t), parent);
}

std::vector<uint64_t> hash_full_blocks(const std::vector<int32_t>& tokens, int64_t block_size) {
  std::vector<uint64_t> out;
  uint64_t h = kRootBlockHash;
  for (int64_t i = 0; (i + 1) * block_size <= static_cast<int64_t>(tokens.size()); ++i) {
    h = hash_block(h, tokens.data() + i * block_size, block_size);
    out.push_back(h);
  }
  return out;
}

}  // namespace brisk
