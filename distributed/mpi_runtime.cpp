#include "distributed/mpi_runtime.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <string>

#include "core/check.h"

namespace ember::distributed {

namespace {

bool abort_at_exit = false;

// The text a SIGTERM prints: written outside the handler, read inside it only while `ready`.
char report[1024];
size_t report_length = 0;
volatile std::sig_atomic_t ready = 0;

void on_terminate(int signal) {
  if (ready) {
    const ssize_t written = write(STDERR_FILENO, report, report_length);
    (void)written;  // nothing to do about a failed write in a handler that is about to die
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void install_termination_report() {
  struct sigaction current {};
  if (sigaction(SIGTERM, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction action {};
  action.sa_handler = on_terminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

// The static in ensure_mpi is destroyed when the program exits, which finalises MPI.
struct MpiRuntime {
  bool initialised_here = false;
  MpiRuntime() {
    int initialised = 0;
    check_mpi(MPI_Initialized(&initialised), "MPI_Initialized");
    if (initialised) return;
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    initialised_here = true;
    install_termination_report();
  }
  ~MpiRuntime() {
    if (mpi_finalised()) return;
    if (abort_at_exit) MPI_Abort(MPI_COMM_WORLD, 1);
    if (initialised_here) MPI_Finalize();
  }
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

}  // namespace

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  EMBER_FAIL("[distributed] ", call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

void ensure_mpi(const std::optional<LaunchInfo>& launch) {
  static MpiRuntime runtime;
  if (!launch) return;
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  EMBER_CHECK(rank == launch->rank && size == launch->size, "[init_process_group] MPI says rank ", rank, " of ", size,
              " but the launcher set ", launch->variables, " to ", launch->rank, " of ", launch->size,
              ": was the program started by another MPI's launcher?");
}

void abort_mpi_at_exit() { abort_at_exit = true; }

void report_if_terminated(const std::string& text) {
  ready = 0;
  report_length = std::min(text.size(), sizeof report);
  std::memcpy(report, text.data(), report_length);
  ready = 1;
}

void clear_termination_report() { ready = 0; }

bool mpi_finalised() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  return finalised != 0;
}

void broadcast_bytes_over_mpi(void* data, int bytes, int root) {
  check_mpi(MPI_Bcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

}  // namespace ember::distributed
