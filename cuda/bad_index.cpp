#include "cuda/bad_index.h"

#include <atomic>
#include <mutex>

#include "core/check.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace ember::cuda {
namespace {

struct Record {
  std::mutex mutex;
  BadIndex* device_record = nullptr;  // allocated on first use, never freed (like the streams)
  std::atomic<bool> unread{false};    // a checking kernel was queued since the last read
};

Record& record(int index) {
  static Record* records = new Record[static_cast<size_t>(device_count() > 0 ? device_count() : 1)];
  check_device(Device(DeviceType::CUDA, index));
  return records[index];
}

}  // namespace

std::string describe(const BadIndex& bad) {
  using ::ember::detail::concat;
  const auto check = static_cast<IndexCheck>(bad.check);
  std::string what;
  switch (check) {
    case IndexCheck::CrossEntropyTarget:
    case IndexCheck::NllLossTarget:
      what = concat("[", check == IndexCheck::NllLossTarget ? "nll_loss" : "cross_entropy", "] target ", bad.value,
                    " is out of range for ", bad.size, " classes");
      break;
    case IndexCheck::IndexSelect:
    case IndexCheck::Gather:
      what = concat("[", check == IndexCheck::Gather ? "gather" : "index_select", "] index ", bad.value,
                    " is out of range for the indexed dim of size ", bad.size);
      break;
    case IndexCheck::Embedding:
      what = concat("[embedding] id ", bad.value, " is out of range for a table of ", bad.size, " embeddings");
      break;
    default: what = concat("[cuda] a kernel found a bad index ", bad.value, " (unknown check ", bad.check, ")");
  }
  return what + " (found on the CUDA device by the kernel and raised at the next synchronisation, so after the call "
                "that passed it returned)";
}

BadIndex* bad_index_record(int index) {
  Record& r = record(index);
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.device_record) {
    DeviceGuard guard(index);
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, sizeof(BadIndex)));
    // Ordered before every kernel that will get the record: they all run on this stream.
    CUDA_CHECK(cudaMemsetAsync(p, 0, sizeof(BadIndex), stream(index)));
    r.device_record = static_cast<BadIndex*>(p);
  }
  r.unread = true;
  return r.device_record;
}

void raise_bad_index(int index) {
  Record& r = record(index);
  if (!r.unread.exchange(false)) return;  // a kernel queued after this point sets it again
  BadIndex found;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    DeviceGuard guard(index);
    cudaStream_t s = stream(index);
    CUDA_CHECK(cudaMemcpyAsync(&found, r.device_record, sizeof found, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    if (!found.found) return;
    CUDA_CHECK(cudaMemsetAsync(r.device_record, 0, sizeof(BadIndex), s));
  }
  EMBER_FAIL(describe(found));
}

}  // namespace ember::cuda
