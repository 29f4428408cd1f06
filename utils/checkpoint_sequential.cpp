#include "utils/checkpoint_sequential.h"

namespace ember::utils {

Tensor checkpoint_sequential(const LayerChain& chain, int64_t segments, const Tensor& x,
                             const CheckpointOptions& options) {
  const auto n = static_cast<int64_t>(chain.size());
  EMBER_CHECK(segments >= 1 && segments <= std::max<int64_t>(n, 1), "[checkpoint_sequential] segments must be in [1, ",
              n, "] for a Sequential of ", n, " module(s), got ", segments);
  const auto size = static_cast<size_t>(n / segments);
  Tensor out = x;
  size_t begin = 0;
  for (int64_t s = 0; s + 1 < segments; ++s, begin += size) out = checkpoint(chain.segment(begin, begin + size), out, options);
  return chain.segment(begin, chain.size())(out);
}

int checkpoint_modules(nn::Module& root, const std::function<bool(nn::Module&)>& which,
                       const CheckpointOptions& options) {
  int switched = 0;
  for (auto& [name, m] : root.named_modules()) {
    if (!which(*m)) continue;
    // The forward the call path hands over runs the module's own forward(), not its call, so
    // the recompute does not come back through this wrapper (Note [The call path]).
    m->set_call_wrapper([options](nn::Module&, const nn::Module::ForwardFn& forward, const nn::Module::Tensors& in) {
      return checkpoint(forward, in, options);
    });
    ++switched;
  }
  return switched;
}

int uncheckpoint_modules(nn::Module& root) {
  int switched = 0;
  for (auto& [name, m] : root.named_modules()) {
    if (!m->has_call_wrapper()) continue;
    m->set_call_wrapper(nullptr);
    ++switched;
  }
  return switched;
}

}  // namespace ember::utils
