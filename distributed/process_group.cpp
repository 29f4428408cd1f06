#include "distributed/process_group.h"

#include <cstdlib>
#include <string>

#include "core/check.h"
#include "distributed/mpi_process_group.h"
#include "distributed/nccl_process_group.h"

namespace ember::distributed {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::MPI: return "MPI";
    case Backend::NCCL: return "NCCL";
  }
  return "?";
}

namespace {
void check_timeout(std::chrono::milliseconds timeout) {
  EMBER_CHECK(timeout.count() > 0, "[ProcessGroup] the timeout must be > 0 ms; got ", timeout.count(), " ms");
}
}  // namespace

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  check_timeout(timeout);
  timeout_ = timeout;
}

namespace {

// The variable's value as a number >= minimum; none when it is not set.
std::optional<int> int_variable(const char* name, int minimum) {
  const char* text = std::getenv(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  EMBER_CHECK(*text != '\0' && *end == '\0' && value >= minimum && value <= (1L << 30), "[init_process_group] ", name,
              "='", text, "' is not a number >= ", minimum);
  return static_cast<int>(value);
}

}  // namespace

std::optional<LaunchInfo> launch_info_from_environment() {
  struct Names {
    const char *rank_name, *size_name, *local_rank_name;
  };
  for (auto [rank_name, size_name, local_rank_name] :
       {Names{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
        Names{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}}) {
    const std::optional<int> rank = int_variable(rank_name, 0), size = int_variable(size_name, 1);
    if (!rank && !size) continue;
    EMBER_CHECK(rank && size, "[init_process_group] ", rank ? size_name : rank_name, " is not set but ",
                rank ? rank_name : size_name, " is: a launcher sets both");
    EMBER_CHECK(*rank < *size, "[init_process_group] ", rank_name, "=", *rank, " is not below ", size_name, "=", *size);
    const std::optional<int> local_rank = int_variable(local_rank_name, 0);
    return LaunchInfo{*rank, *size, local_rank.value_or(*rank), detail::concat(rank_name, "/", size_name)};
  }
  return std::nullopt;
}

std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options) {
  const std::optional<LaunchInfo> launch = launch_info_from_environment();
  EMBER_CHECK(launch || !options.require_launcher,
              "[init_process_group] this process was not started by a launcher (neither OMPI_COMM_WORLD_RANK/SIZE "
              "nor PMI_RANK/SIZE is set): run it as `mpirun -np <processes> <program> ...`, or set "
              "require_launcher = false to run it as a group of one process");
  check_timeout(options.timeout);  // before a backend starts: the NCCL group's start waits under it
  std::shared_ptr<ProcessGroup> group;
  switch (options.backend) {
    case Backend::MPI: group = make_mpi_process_group(launch); break;
    case Backend::NCCL: group = make_nccl_process_group(launch, options.timeout); break;
  }
  EMBER_CHECK(group, "[init_process_group] unknown backend");
  group->set_timeout(options.timeout);
  return group;
}

}  // namespace ember::distributed
