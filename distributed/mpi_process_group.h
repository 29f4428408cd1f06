#pragma once
// The MPI backend of Note [Process groups] (CPU tensors). Internal: programs get it from
// init_process_group.
#include <memory>
#include <optional>

#include "distributed/process_group.h"

namespace ember::distributed {

// Initialises MPI if needed (a process started without a launcher becomes a group of one, MPI's
// "singleton" start) and checks that MPI's rank and size are the launcher's.
std::shared_ptr<ProcessGroup> make_mpi_process_group(const std::optional<LaunchInfo>& launch);

}  // namespace ember::distributed
