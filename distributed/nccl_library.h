#pragma once
// Note [NCCL loaded at run time]
// libnccl is 218 MB (kernels for every GPU architecture) and only a program that makes an NCCL
// group needs it. ember::distributed is therefore not linked with it: the NCCL backend includes
// nccl.h for its types and loads libnccl.so.2 with dlopen the first time a program makes an NCCL
// group. A program linked with ember::distributed starts, and trains on MPI, on a machine without
// NCCL, and the GPU bundle (scripts/gpu-bundle) runs the machine's own: packed as the bundle packs
// (xz -6), NCCL 2.28's library is still 175 MB, three times the bundle's 60 MiB limit. A missing library, or one too old to have a function the
// backend calls, is an ember::Error when the group is made.
#include <nccl.h>

namespace ember::distributed {

// The NCCL functions the backend calls, from the loaded library.
struct NcclLibrary {
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config;
  decltype(&ncclCommFinalize) comm_finalize;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclGetLastError) get_last_error;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllGather) all_gather;
};

// Loads libnccl.so.2 on the first call (the loader's search: LD_LIBRARY_PATH, the program's run
// path, the system's folders); an Error when it is not found or lacks a function.
const NcclLibrary& nccl();

}  // namespace ember::distributed
