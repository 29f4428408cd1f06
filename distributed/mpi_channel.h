#pragma once
// Forwarding header, kept for one release: the MPI backend's internal MpiChannel became
// CollectiveWatch (distributed/collective_watch.h: the numbering, the arrivals and the timeouts,
// shared with the NCCL backend since both bound their collectives) and the MPI group's own
// communicator. See CHANGELOG.md.
#include "distributed/collective_watch.h"
