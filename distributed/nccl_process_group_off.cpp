// make_nccl_process_group in a build without NCCL (EMBER_NCCL=OFF, no CUDA backend, or no NCCL
// found): Backend::NCCL says why it is not there.
#include "core/check.h"
#include "distributed/nccl_process_group.h"

namespace ember::distributed {

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::optional<LaunchInfo>&, std::chrono::milliseconds) {
  EMBER_FAIL("[init_process_group] this build of ember has no NCCL backend (CUDA tensors): it needs the CUDA "
             "backend and NCCL (configure with EMBER_CUDA=ON EMBER_NCCL=ON); use Backend::MPI with CPU tensors");
}

}  // namespace ember::distributed
