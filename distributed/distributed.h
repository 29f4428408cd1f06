#pragma once
// ember::distributed (link ember::distributed): process groups over MPI and
// DistributedDataParallel. docs/distributed.md explains how they work.
#include "distributed/buckets.h"
#include "distributed/data_parallel.h"
#include "distributed/process_group.h"
