// Reads the first and last byte of every tensor view: ASan flags any view that a parser's
// validation let point outside its input.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor_view.h"

namespace fuzz {

inline void touch_tensors(const std::vector<brisk::TensorView>& tensors) {
  volatile uint8_t sink = 0;
  for (const auto& t : tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    const size_t n = t.nbytes();
    if (n) sink = sink + p[0] + p[n - 1];
  }
}

}  // namespace fuzz
