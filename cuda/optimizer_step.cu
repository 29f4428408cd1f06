// The CUDA kernel of the fused optimizer step (Note [Multi-tensor optimizer updates] in
// core/optimizer_step.h): a multi-tensor apply. The parameters of a call are cut into pieces of
// at most kPiece elements, one block each; the table of parameters (their pointers, sizes and
// per-parameter scalars) and the list of pieces go to the device in one upload, and one launch
// updates them all, where the composed update launches a handful of kernels per parameter. The
// rules are the CPU's (core/kernel_bodies/optimizer_updates.h), one kernel per combination of
// options. This file is compiled with --fmad=false, so they round as on the CPU (Note [Replaying
// the composed update's rounding]).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/kernel_bodies/optimizer_updates.h"
#include "core/kernels.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace ember::cuda {
namespace {

using optimizer_bodies::ParamEntry;

inline constexpr int64_t kPiece = 16384;  // elements per block: 64 per thread
inline constexpr int kThreads = 256;

// Elements [begin, end) of the table's parameter `param`: one block's work.
struct Piece {
  int64_t param, begin, end;
};

template <bool kFirstStep, class T, class Update>
__device__ void update_piece(const Update& update, const ParamEntry<T, typename Update::PerParam>& e,
                             const Piece& piece) {
  for (int64_t i = piece.begin + threadIdx.x; i < piece.end; i += blockDim.x)
    optimizer_bodies::update_element<kFirstStep>(update, e, i);
}

template <class T, class Update>
__global__ void optimizer_step_kernel(const ParamEntry<T, typename Update::PerParam>* table, const Piece* pieces,
                                      Update update) {
  const Piece piece = pieces[blockIdx.x];
  const ParamEntry<T, typename Update::PerParam> e = table[piece.param];
  if constexpr (Update::kFirstStepDiffers) {
    if (e.first_step) return update_piece<true>(update, e, piece);
  }
  update_piece<false>(update, e, piece);
}

template <class T, class Update>
void run_update(const Update& update, const std::vector<FusedParam>& params) {
  using Entry = ParamEntry<T, typename Update::PerParam>;
  const std::vector<Entry> table = optimizer_bodies::make_table<T>(update, params);
  std::vector<Piece> pieces;
  for (size_t j = 0; j < table.size(); ++j)
    for (int64_t begin = 0; begin < table[j].numel; begin += kPiece)
      pieces.push_back({static_cast<int64_t>(j), begin, std::min(table[j].numel, begin + kPiece)});
  if (pieces.empty()) return;

  // One upload: the table, then the pieces (Piece's alignment divides Entry's size).
  static_assert(sizeof(Entry) % alignof(Piece) == 0);
  const size_t table_bytes = table.size() * sizeof(Entry), pieces_bytes = pieces.size() * sizeof(Piece);
  const Tensor host = empty({static_cast<int64_t>(table_bytes + pieces_bytes)}, kUInt8);
  char* bytes = static_cast<char*>(host.raw_data());
  std::memcpy(bytes, table.data(), table_bytes);
  std::memcpy(bytes + table_bytes, pieces.data(), pieces_bytes);
  const Device device = params.front().param.device();
  const Tensor uploaded = host.to(device);  // stream-ordered before the launch (Note [One stream per device])
  const char* on_device = static_cast<const char*>(uploaded.raw_data());

  DeviceGuard guard(device.index);
  optimizer_step_kernel<T, Update><<<static_cast<unsigned>(pieces.size()), kThreads, 0, stream(device.index)>>>(
      reinterpret_cast<const Entry*>(on_device), reinterpret_cast<const Piece*>(on_device + table_bytes), update);
  CUDA_CHECK(cudaGetLastError());
}

void optimizer_step_cuda(const OptimizerRule& rule, const std::vector<FusedParam>& params) {
  optimizer_bodies::visit_update(rule, params.front().param.dtype(),
                                 [&]<class T>(const auto& update) { run_update<T>(update, params); });
}

const bool registered = kernels::add_kernel(kernels::optimizer_step, DeviceType::CUDA, &optimizer_step_cuda);

}  // namespace
}  // namespace ember::cuda
