#include "distributed/nccl_library.h"

#include <dlfcn.h>

#include <string>

#include "core/check.h"

namespace ember::distributed {

namespace {

NcclLibrary load() {
  // Never closed: the library's own threads and CUDA resources live until the process ends.
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  EMBER_CHECK(handle, "[init_process_group] the NCCL backend cannot load NCCL's library: ", dlerror(),
              " (put the folder that holds libnccl.so.2, e.g. the CUDA toolkit's lib64, on LD_LIBRARY_PATH)");
  auto symbol = [&]<class Function>(Function& function, const char* name) {
    function = reinterpret_cast<Function>(dlsym(handle, name));
    EMBER_CHECK(function, "[init_process_group] the loaded libnccl.so.2 has no ", name,
                ": ember's NCCL backend needs NCCL 2.14 or newer (non-blocking communicators)");
  };
  NcclLibrary l{};
  symbol(l.get_version, "ncclGetVersion");
  symbol(l.get_unique_id, "ncclGetUniqueId");
  symbol(l.comm_init_rank_config, "ncclCommInitRankConfig");
  symbol(l.comm_finalize, "ncclCommFinalize");
  symbol(l.comm_destroy, "ncclCommDestroy");
  symbol(l.comm_abort, "ncclCommAbort");
  symbol(l.comm_get_async_error, "ncclCommGetAsyncError");
  symbol(l.get_error_string, "ncclGetErrorString");
  symbol(l.get_last_error, "ncclGetLastError");
  symbol(l.all_reduce, "ncclAllReduce");
  symbol(l.broadcast, "ncclBroadcast");
  symbol(l.all_gather, "ncclAllGather");
  return l;
}

}  // namespace

const NcclLibrary& nccl() {
  static const NcclLibrary library = load();
  return library;
}

}  // namespace ember::distributed
