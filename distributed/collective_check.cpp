#include "distributed/collective_check.h"

#include <string>

#include "core/check.h"

namespace ember::distributed {

namespace {

const char* collective_name(int64_t c) {
  switch (static_cast<Collective>(c)) {
    case Collective::Allreduce: return "allreduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::Allgather: return "allgather";
  }
  return "an unknown collective";
}

std::string tensor_words(int64_t dtype, const Shape& shape) {
  return detail::concat("a ", dtype_name(static_cast<DType>(dtype)), " tensor of shape ", shape_str(shape));
}

}  // namespace

const char* collective_name(Collective collective) { return collective_name(static_cast<int64_t>(collective)); }

void check_same_call_on_all_ranks(Collective collective, const Tensor& tensor, int root, int size,
                                  const GatherWords& gather) {
  const char* name = collective_name(static_cast<int64_t>(collective));
  // Step 1: what is called, on which dtype, how many dimensions, which root. Step 2 (the sizes)
  // can only be gathered once every rank agrees on how many words that is.
  enum Word { kCollective, kDType, kDims, kRoot, kWords };
  const std::vector<int64_t> mine{static_cast<int64_t>(collective), static_cast<int64_t>(tensor.dtype()),
                                  tensor.dim(), root};
  const std::vector<int64_t> all = gather(mine);
  auto word = [&](int rank, int w) { return all[static_cast<size_t>(rank * kWords + w)]; };
  for (int r = 1; r < size; ++r) {
    EMBER_CHECK(word(r, kCollective) == word(0, kCollective), "[", name, "] the ranks call different collectives: rank 0 ",
                collective_name(word(0, kCollective)), ", rank ", r, " ", collective_name(word(r, kCollective)),
                "; every rank must run the same collectives in the same order");
    EMBER_CHECK(word(r, kRoot) == word(0, kRoot), "[", name, "] the ranks name different roots: rank 0 root ",
                word(0, kRoot), ", rank ", r, " root ", word(r, kRoot));
  }
  auto layout = [&](int rank) {
    return detail::concat("a ", dtype_name(static_cast<DType>(word(rank, kDType))), " tensor of ", word(rank, kDims),
                          " dimension(s)");
  };
  for (int r = 1; r < size; ++r)
    EMBER_CHECK(word(r, kDims) == word(0, kDims) && word(r, kDType) == word(0, kDType), "[", name,
                "] the ranks' tensors differ: rank 0 has ", layout(0), ", rank ", r, " has ", layout(r),
                "; every rank must pass the same dtype and shape");
  // Same dtype and number of dimensions everywhere: now the sizes, the same count on each rank.
  const std::vector<int64_t> sizes = gather(tensor.shape());
  const auto dims = static_cast<size_t>(tensor.dim());
  auto shape_of = [&](int rank) {
    auto first = sizes.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(rank) * dims);
    return Shape(first, first + static_cast<std::ptrdiff_t>(dims));
  };
  for (int r = 1; r < size; ++r)
    EMBER_CHECK(shape_of(r) == shape_of(0), "[", name, "] the ranks' tensors differ: rank 0 has ",
                tensor_words(word(0, kDType), shape_of(0)), ", rank ", r, " has ", tensor_words(word(r, kDType), shape_of(r)),
                "; every rank must pass the same dtype and shape");
}

void check_reduce_op(const Tensor& tensor, ReduceOp op, const char* api) {
  check_enum(op, ReduceOp::Avg, api, "ReduceOp");
  EMBER_CHECK(op == ReduceOp::Sum || is_floating(tensor.dtype()), "[", api,
              "] ReduceOp::Avg needs a floating tensor; got ", tensor.dtype());
}

void check_root(int root, int size, const char* api) {
  EMBER_CHECK(root >= 0 && root < size, "[", api, "] root ", root, " is not a rank of this group of ", size);
}

}  // namespace ember::distributed
