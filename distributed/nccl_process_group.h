#pragma once
// The NCCL backend of Note [Process groups] (CUDA tensors; Note [NCCL collectives] in
// distributed/nccl_process_group.cpp). Internal: programs get it from init_process_group with
// Backend::NCCL. In a build without NCCL (EMBER_NCCL), nccl_process_group_off.cpp defines
// make_nccl_process_group as an Error that says so.
#include <chrono>
#include <memory>
#include <optional>

#include "distributed/process_group.h"

namespace ember::distributed {

// Rank `launch->rank` of `launch->size` on GPU `launch->local_rank` (none: a group of one on GPU 0);
// its start is bounded by `timeout`, as its collectives are (Note [Collective timeouts]).
std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::optional<LaunchInfo>& launch,
                                                      std::chrono::milliseconds timeout);

}  // namespace ember::distributed
