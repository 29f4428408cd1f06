#pragma once
// Forwarding header, deprecated since 0.2.0 and gone in 0.3.0: the MPI backend's internal
// MpiChannel became CollectiveWatch (distributed/collective_watch.h: the numbering, the arrivals
// and the timeouts, shared with the NCCL backend since both bound their collectives) and the MPI
// group's own communicator. See CHANGELOG.md.
#pragma message("ember: distributed/mpi_channel.h is deprecated and goes in 0.3.0; "
                "include distributed/collective_watch.h instead")
#include "distributed/collective_watch.h"
