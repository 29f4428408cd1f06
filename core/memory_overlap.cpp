#include "core/memory_overlap.h"

#include <algorithm>
#include <vector>

namespace ember {

// Note [In-place writes and memory overlap]
// An elementwise kernel reads each input element and writes one output element, in no promised
// order (a thread team on the CPU, thousands of threads on the GPU). Writing in place is safe when
// every output element is read only by its own step, which holds when the input is the output
// itself (x.add_(x)) or shares no memory with it. Two cases are not, and are refused as PyTorch
// refuses them:
// - internal overlap: the output repeats an address (an expanded view, stride 0), so several
//   steps write one element and the result depends on who writes last;
// - partial overlap: input and output share memory but not element by element, as x.add_(x.t())
//   (element (0, 1) of the result is read as the input of element (1, 0)) or a copy between two
//   overlapping slices. Whether a step reads a value before or after another step wrote it
//   decides the result, which differs between devices and runs.
// Like PyTorch, overlap is worked out only for dense tensors, from their address ranges; when a
// tensor that shares the storage is not dense (a slice with a step, a broadcast input), the
// answer is TooHard and the write is allowed. fill_ and zero_ write one value everywhere, so
// they skip the internal check (PyTorch's fill_ does too).

bool is_non_overlapping_and_dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims of size > 1
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) dims.emplace_back(t.stride(d), t.size(d));
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

namespace {

// The strides of the dims that have more than one element (the others are never stepped on).
Shape walked_strides(const Tensor& t) {
  Shape strides;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) strides.push_back(t.stride(d));
  return strides;
}

}  // namespace

Overlap overlap(const Tensor& a, const Tensor& b) {
  if (a.is_same(b)) return Overlap::Full;
  if (a.numel() == 0 || b.numel() == 0 || a.storage() != b.storage()) return Overlap::No;
  if (!is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b)) return Overlap::TooHard;
  // Dense: each occupies [first byte, first byte + nbytes) and nothing else.
  const auto begin = [](const Tensor& t) {
    return t.offset() * static_cast<int64_t>(element_size(t.dtype()));
  };
  const int64_t a_begin = begin(a), b_begin = begin(b);
  const int64_t a_end = a_begin + static_cast<int64_t>(a.nbytes()), b_end = b_begin + static_cast<int64_t>(b.nbytes());
  if (a_begin == b_begin && a_end == b_end)
    return a.shape() == b.shape() && walked_strides(a) == walked_strides(b) ? Overlap::Full : Overlap::Partial;
  return a_begin < b_end && b_begin < a_end ? Overlap::Partial : Overlap::No;
}

void check_no_internal_overlap(const Tensor& out, const char* op) {
  if (is_non_overlapping_and_dense(out)) return;
  for (int64_t d = 0; d < out.dim(); ++d)
    EMBER_CHECK(out.stride(d) != 0 || out.size(d) <= 1, "[", op, "] unsupported operation: more than one element "
                "of the written-to tensor of shape ", shape_str(out.shape()), " (strides ", shape_str(out.strides()),
                ") refers to a single memory location; clone() it before writing in place");
}

void check_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op) {
  EMBER_CHECK(overlap(out, in) != Overlap::Partial, "[", op, "] unsupported operation: some elements of the input "
              "tensor of shape ", shape_str(in.shape()), " (strides ", shape_str(in.strides()), ") and the "
              "written-to tensor of shape ", shape_str(out.shape()), " (strides ", shape_str(out.strides()),
              ") refer to a single memory location; clone() the input first");
}

}  // namespace ember
