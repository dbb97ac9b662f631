// Which tokens a draft model keeps logits for under --draft-vocab N (FR-Spec: Zhao et al.,
// ACL 2025, arXiv 2502.14856; Model::set_output_rows). A guess outside the kept set is
// impossible, so the set should hold the tokens text uses most. FR-Spec counts them over a
// corpus; here the ids rank them: a byte-level BPE vocabulary is numbered in merge order,
// and merges were made most frequent pair first over the tokenizer's whole training text.
// On brisk-small with brisk-tiny drafting, the first 8,192 ids kept acceptance as it was on
// code editing and long QA and lost one point on prose, while counts over brisk-tiny's dev
// split (0.8 MB) lost six points on prose (docs/benchmarks.md, "Session 16").
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

class Tokenizer;

// The first n ids, plus every end-of-generation token (so the draft can guess where an
// answer stops) in place of the last ones; empty (the whole vocabulary) for n = 0 or n at
// least the vocabulary's size. Throws brisk::Error for n < 0.
std::vector<int32_t> draft_vocabulary(const Tokenizer& tok, int64_t n);

}  // namespace brisk
