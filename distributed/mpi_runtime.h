#pragma once
// MPI once per process, for the backends that use it: MpiProcessGroup's collectives, and the
// NCCL backend's start, which sends rank 0's NCCL id to the other ranks over MPI (Note [Starting
// an NCCL group]). Internal to distributed/.
#include <optional>
#include <string>

#include "distributed/process_group.h"

namespace ember::distributed {

// Turns an MPI return code into an Error naming the call (ember's communicators use
// MPI_ERRORS_RETURN, so MPI reports failures instead of aborting the process).
void check_mpi(int code, const char* call);

// Initialises MPI on the first call (a process started without a launcher becomes a group of
// one, MPI's "singleton" start); finalised when the program exits. Only the thread that
// initialised it calls MPI (MPI_THREAD_FUNNELED): the training thread, which also runs backward
// and its hooks. Then checks that MPI's rank and size are the launcher's.
void ensure_mpi(const std::optional<LaunchInfo>& launch);

// After a collective timed out (Note [Collective timeouts]) the process must not end in
// MPI_Finalize, which waits for every rank: at exit it calls MPI_Abort instead, which ends the
// whole job (mpirun then stops every rank and exits non-zero).
void abort_mpi_at_exit();

// What this rank waits for, written to stderr if the process is terminated (SIGTERM: what mpirun
// sends the other ranks when one dies) while it waits; cleared when the wait ends. The handler is
// installed with MPI, only where the program has not installed its own.
void report_if_terminated(const std::string& text);
void clear_termination_report();

// Whether MPI_Finalize has run (a destructor at exit must not call MPI after it).
bool mpi_finalised();

// `bytes` bytes at `data` on rank `root` of MPI_COMM_WORLD copied to every other rank's `data`.
void broadcast_bytes_over_mpi(void* data, int bytes, int root);

}  // namespace ember::distributed
