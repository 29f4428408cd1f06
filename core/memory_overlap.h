#pragma once
// Whether an in-place write may read an element it has already overwritten: the checks the
// in-place ops (add_, mul_, copy_, ...) run before they launch a kernel. Note [In-place writes and
// memory overlap] in core/memory_overlap.cpp.
#include "core/tensor.h"

namespace ember {

// How the memory of two tensors relates. TooHard: they share storage but one of them is not
// dense (a strided slice, a broadcast), and the overlap is not worked out element by element.
enum class Overlap { No, Full, Partial, TooHard };

// Every element at its own address and the elements filling one unbroken range: some
// permutation of the dims is contiguous (a transpose is dense; a slice with a step or a broadcast
// is not). Size-1 dims and their strides do not matter.
bool is_non_overlapping_and_dense(const Tensor& t);

Overlap overlap(const Tensor& a, const Tensor& b);

// Throws unless every element of `out` has its own address (PyTorch refuses a write into a
// broadcast view: a dim of size > 1 and stride 0).
void check_no_internal_overlap(const Tensor& out, const char* op);
// Throws if `in` and `out` share some elements but are not the same elements in the same order.
void check_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op);

}  // namespace ember
