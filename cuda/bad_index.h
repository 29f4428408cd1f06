#pragma once
// Out-of-range indices found by CUDA kernels, reported at the next synchronisation.
//
// Note [Index errors found on the device]
// The CPU checks every index (cross_entropy's and nll_loss's targets, index_select's and gather's
// indices, embedding's ids) before its kernel runs. For a CUDA tensor that check would copy the
// indices to the host and wait for the device on every call, stalling the stream once per loss.
// Instead the kernel that reads an index checks it: the first thread to see a bad one claims the
// device's BadIndex record (an atomicCAS on `found`) and writes what it saw, reads nothing out of
// range, and writes 0 where the bad index would have led. The record is read back where the host
// waits for the device anyway: after a copy to or from the host (item(), to_vector(), .cpu())
// and in cuda::synchronize(). A set record is cleared and raised there as the ember::Error the
// CPU would have raised, with a note that it surfaced late. PyTorch does the same with a
// device-side assert, except that its assert leaves the CUDA context unusable and ember's record
// does not. Only the first bad index (in time) is reported; the record is only read when a
// checking kernel ran since the last read, so plain synchronisations cost nothing extra.
#include <cstdint>
#include <string>

namespace ember::cuda {

// Which check found the index; the message names the op the user called.
enum class IndexCheck : int32_t { CrossEntropyTarget = 1, IndexSelect, Gather, Embedding, NllLossTarget };

struct BadIndex {
  int32_t found = 0;  // 0 until a kernel finds a bad index; the one that sets it fills the rest
  int32_t check = 0;  // an IndexCheck
  int64_t value = 0;  // the index
  int64_t size = 0;   // the range it broke: [0, size)
};

// The message of a found record, worded as the CPU's check.
std::string describe(const BadIndex& bad);

// The device's record in device memory, zeroed on first use; a kernel that checks indices gets
// it through this, which also marks the record for reading at the next synchronisation.
BadIndex* bad_index_record(int device);

// Called after the host waited for `device`'s stream: throws describe(record) if a kernel found a
// bad index since the last call, and clears the record.
void raise_bad_index(int device);

}  // namespace ember::cuda
