#pragma once
// The header exchange of Note [Process groups]: before a blocking collective, every rank
// describes its call in a few int64 words and all ranks gather everyone's description. Each rank
// then runs the same comparison on the same gathered words, so either all ranks go on or all
// throw the same Error: a mismatch never leaves one rank waiting in a collective the others left.
// Backend-independent: a backend passes its allgather of int64 words.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "distributed/process_group.h"

namespace ember::distributed {

enum class Collective : int64_t { Allreduce, Broadcast, Allgather };
const char* collective_name(Collective collective);

// Gathers `words` (the same count on every rank) from all ranks, rank r's at [r * count, ...).
using GatherWords = std::function<std::vector<int64_t>(const std::vector<int64_t>& words)>;

// Throws, on every rank alike, unless all ranks call `collective` with a tensor of this dtype and
// shape (and, for a broadcast, the same root).
void check_same_call_on_all_ranks(Collective collective, const Tensor& tensor, int root, int size,
                                  const GatherWords& gather);

// The argument checks both backends make before a collective (`api` names the call in messages).
// Average = sum / size, for floating tensors only (an integer average would round).
void check_reduce_op(const Tensor& tensor, ReduceOp op, const char* api);
void check_root(int root, int size, const char* api);

// Runs `collective` on tensor's memory, or on a contiguous copy that is then copied back.
template <class Collective>
void in_place_on_contiguous(const Tensor& tensor, Collective collective) {
  if (tensor.is_contiguous()) return collective(tensor);
  const Tensor buffer = tensor.contiguous();
  collective(buffer);
  tensor.copy_(buffer);
}

}  // namespace ember::distributed
