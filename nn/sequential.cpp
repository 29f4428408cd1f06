#include "nn/sequential.h"

namespace ember::nn {

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (Module& m : *this) out = m(out);
  return out;
}

}  // namespace ember::nn
