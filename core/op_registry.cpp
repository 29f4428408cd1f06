#include "core/op_registry.h"

#include <array>

#include "core/check.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace ember {
namespace {

// Note [The op registry]: a name in the lists that nothing declares fails to compile here.
namespace declared {
#define EMBER_USING_FREE_OP(name, family) using ember::name;
EMBER_FREE_OPS(EMBER_USING_FREE_OP)
#undef EMBER_USING_FREE_OP
}  // namespace declared

struct DeclaredMethods : Tensor {
#define EMBER_USING_METHOD(name, family) using Tensor::name;
  EMBER_TENSOR_METHOD_OPS(EMBER_USING_METHOD)
#undef EMBER_USING_METHOD
};

#define EMBER_FREE_ENTRY(name, family) RegisteredOp{#name, OpFamily::family, false},
#define EMBER_METHOD_ENTRY(name, family) RegisteredOp{#name, OpFamily::family, true},
constexpr std::array kOps{EMBER_FREE_OPS(EMBER_FREE_ENTRY) EMBER_TENSOR_METHOD_OPS(EMBER_METHOD_ENTRY)};
#undef EMBER_FREE_ENTRY
#undef EMBER_METHOD_ENTRY

}  // namespace

std::span<const RegisteredOp> registered_ops() { return kOps; }

const char* op_family_name(OpFamily family) {
  switch (family) {
    case OpFamily::Elementwise: return "elementwise";
    case OpFamily::Comparison: return "comparison";
    case OpFamily::Reduction: return "reduction";
    case OpFamily::Sorting: return "sorting";
    case OpFamily::Matmul: return "matmul";
    case OpFamily::Loss: return "loss";
    case OpFamily::Indexing: return "indexing";
    case OpFamily::ConvPoolNorm: return "convolution, pooling, normalisation";
    case OpFamily::Transformer: return "transformer";
    case OpFamily::Shape: return "shape";
    case OpFamily::Fingerprint: return "fingerprint";
  }
  EMBER_FAIL("[op_family_name] unknown op family ", static_cast<int>(family));
}

}  // namespace ember
