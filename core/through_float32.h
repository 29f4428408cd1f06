#pragma once
// Note [Sixteen-bit floats through float32]
// bfloat16 and float16 are storage formats: PyTorch computes on them in float32 and rounds each
// op's result once (Note [Sixteen-bit floats]). So every kernel has a correct 16-bit path before
// it has a fast one: the kernel table stages the call. Each bfloat16 or float16 tensor argument
// is converted to a float32 tensor of its shape (contiguous, which every kernel contract
// accepts), the float32 kernel runs on those, and each argument the kernel writes (its Writes
// positions) is converted back into the caller's tensor, through the caller's strides. The ops
// above see a kernel that takes and returns 16-bit tensors; autograd saves 16-bit tensors, so
// activations take half the memory of float32 ones; the kernels below see only float32.
// A written argument is also converted on the way in, because some kernels accumulate into
// their output (matmul's bias, index_add, max-pool's backward). Aliasing is safe: an in-place
// op's input and output become two float32 tensors, and only the output is written back.
// The cost is two conversion passes per argument and a float32 temporary; a kernel that has its
// own 16-bit path registers with SixteenBit::Native and the table calls it directly.
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/kernel_table.h"

namespace ember::kernels::detail {

// One argument of a staged call: a 16-bit tensor becomes a float32 copy; everything else passes.
// sixteen_bit_dtype says which 16-bit dtype the argument stages, Float32 for none. A struct of
// tensors specialises Staged where it is declared (BatchNormRunning, core/kernels/batch_norm.h).
template <class A>
struct Staged {
  const A& original;
  Staged(const A& a, bool) : original(a) {}
  const A& argument() const { return original; }
  void write_back() const {}
  static DType sixteen_bit_dtype(const A&) { return kFloat32; }
};

inline bool stages(const Tensor& t) { return t.defined() && is_sixteen_bit(t.dtype()); }

// dst = src converted to dst's dtype, on their device: the copy kernel's slot, called out of line
// (core/kernels.cpp) because that kernel is declared in core/kernels/elementwise.h, after this.
void convert_into(const Tensor& src, const Tensor& dst);

inline Tensor float32_copy(const Tensor& t) {
  Tensor f = empty(t.shape(), TensorOptions(kFloat32).with_device(t.device()));
  if (f.numel() > 0) convert_into(t, f);
  return f;
}

template <>
struct Staged<Tensor> {
  const Tensor& original;
  bool written;
  Tensor staged;
  Staged(const Tensor& t, bool w) : original(t), written(w) {
    if (stages(t)) staged = float32_copy(t);
  }
  const Tensor& argument() const { return staged.defined() ? staged : original; }
  void write_back() const {
    if (written && staged.defined() && staged.numel() > 0) convert_into(staged, original);
  }
  static DType sixteen_bit_dtype(const Tensor& t) { return stages(t) ? t.dtype() : kFloat32; }
};

template <class... Args>
DType sixteen_bit_dtype(const Args&... args) {
  DType found = kFloat32;
  ((found = found != kFloat32 ? found : Staged<Args>::sixteen_bit_dtype(args)), ...);
  return found;
}

template <class R, class... Args, size_t... I>
R call_staged(R (*fn)(Args...), uint32_t writes, std::index_sequence<I...>, std::type_identity_t<Args>... args) {
  std::tuple<Staged<std::decay_t<Args>>...> staged{Staged<std::decay_t<Args>>(args, (writes >> I) & 1u)...};
  auto write_back = [&] { (std::get<I>(staged).write_back(), ...); };
  if constexpr (std::is_void_v<R>) {
    fn(std::get<I>(staged).argument()...);
    write_back();
  } else {
    R result = fn(std::get<I>(staged).argument()...);
    write_back();
    return result;
  }
}

template <class R, class... Args>
R through_float32(R (*fn)(Args...), uint32_t writes, Args... args) {
  return call_staged(fn, writes, std::index_sequence_for<Args...>{}, args...);
}

}  // namespace ember::kernels::detail
