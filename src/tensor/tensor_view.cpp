#include "tensor/tensor_view.h"

namespace brisk {

std::string TensorView::shape_str() const {
  std::string s = "[";
  int nd = n_dims < 1 ? 1 : n_dims;
  for (int i = 0; i < nd; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

}  // namespace brisk
