#include "optim/float32_copies.h"

namespace ember::optim {

Float32Copies::Work Float32Copies::prepare(const Tensor& param) {
  if (!is_sixteen_bit(param.dtype())) return {param, param.grad()};
  Work work{param.to(kFloat32), param.grad().to(kFloat32)};
  copies_.emplace_back(param, work.param);
  return work;
}

void Float32Copies::write_back() const {
  for (const auto& [param, copy] : copies_) param.copy_(copy);
}

}  // namespace ember::optim
