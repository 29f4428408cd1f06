#pragma once
// Note [The kernel table]
// Every computation that touches tensor memory goes through a kernel of this table. Each kernel
// has one slot per device type; core/cpu/*.cpp fill the CPU slots and cuda/*.cu fill the CUDA
// slots, both at start-up through static registrars. Ops (core/ops/*.cpp) never look at a
// device: they check arguments, allocate outputs and call `kernels::name[device](args...)`.
// An empty slot throws "[name] has no CUDA kernel (built without CUDA)". Each kernel also says
// which of its arguments it writes (Writes{...}): with that the table gives a kernel that has no
// bfloat16 or float16 path of its own those dtypes staged through float32 (Note [Sixteen-bit
// floats through float32] in core/through_float32.h), so every op takes them. The kernels
// themselves, a signature and a slot each, are declared one family to a header in
// core/kernels/; core/kernels.h includes them all.
//
// Contracts shared by all kernels: outputs are allocated by the caller (contiguous, except that
// fill, copy, unary and binary also write through views for the in-place ops); inputs are on the
// output's device; shapes are already checked and broadcast (stride-0 views), so a kernel never
// has to report user errors.
#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "core/check.h"
#include "core/tensor.h"

namespace ember::kernels {

// Note [A backend's first call]
// A backend may need to refuse work before its first kernel runs: the CPU backend, when an
// environment variable chose something it cannot run (Note [Choices from the environment] in
// core/environment_choice.h). It registers a check for its device type; the table runs the check
// when a kernel of that type is looked up until the check passes once, on the caller's thread
// (so its ember::Error reaches the op's caller), and after that a lookup costs one relaxed load.
// A check that throws runs again at the next lookup, so every call fails until the program
// fixes the choice.
using DeviceCheck = void();
bool set_device_check(DeviceType type, DeviceCheck* check);
namespace detail {
inline std::atomic<bool> device_checked[kNumDeviceTypes];  // constant-initialised to false
void run_device_check(DeviceType type);                    // sets device_checked when it passes
}  // namespace detail

// Which arguments of a kernel it writes, by position: Writes{2} for unary's `out`. The table
// needs it for Note [Sixteen-bit floats through float32].
struct Writes {
  constexpr Writes(std::initializer_list<int> positions) {
    for (int p : positions) mask |= 1u << p;
  }
  uint32_t mask = 0;
};

// Which 16-bit float dtypes a kernel computes on itself; the others it is given staged.
enum class SixteenBit : uint8_t { ThroughFloat32 = 0, BFloat16 = 1, Float16 = 2, Native = 3 };
inline bool takes(SixteenBit native, DType dtype) {
  const auto bit = static_cast<uint8_t>(dtype == DType::BFloat16 ? SixteenBit::BFloat16 : SixteenBit::Float16);
  return (static_cast<uint8_t>(native) & bit) != 0;
}

namespace detail {
template <class R, class... Args>
R through_float32(R (*fn)(Args...), uint32_t writes, Args... args);
// The dtype of the first bfloat16 or float16 tensor among args; Float32 when there is none.
template <class... Args>
DType sixteen_bit_dtype(const Args&... args);
[[noreturn]] void no_sixteen_bit_kernel(const char* name, DType dtype);
}  // namespace detail

template <class Fn>
class Kernel;

template <class R, class... Args>
class Kernel<R(Args...)> {
 public:
  using Fn = R(Args...);
  constexpr Kernel(const char* name, Writes writes) : name_(name), writes_(writes.mask), stageable_(true) {}
  // A kernel declared without its Writes cannot be staged: a 16-bit tensor reaching it is an
  // error unless its slot is SixteenBit::Native.
  constexpr explicit Kernel(const char* name) : name_(name), writes_(0), stageable_(false) {}

  void set(DeviceType type, Fn* fn, SixteenBit native) {
    slots_[static_cast<int>(type)] = fn;
    native_[static_cast<int>(type)] = native;
  }
  bool has(DeviceType type) const { return slots_[static_cast<int>(type)] != nullptr; }

  // Calls fn with its 16-bit tensors staged through float32: for a kernel that takes a 16-bit
  // dtype natively only in some cases (Note [Sixteen-bit floats through float32]).
  R staged(Fn* fn, Args... args) const { return detail::through_float32<R, Args...>(fn, writes_, args...); }

  // The slot for `device`, as a callable that stages 16-bit float arguments when the kernel has
  // no path of its own for them.
  class Call {
   public:
    R operator()(Args... args) const {
      const SixteenBit native = kernel_.native_[type_];
      if (native != SixteenBit::Native) {
        const DType sixteen_bit = detail::sixteen_bit_dtype(args...);
        if (sixteen_bit != kFloat32 && !takes(native, sixteen_bit)) [[unlikely]] {
          if (!kernel_.stageable_) detail::no_sixteen_bit_kernel(kernel_.name_, sixteen_bit);
          return kernel_.staged(fn_, args...);
        }
      }
      return fn_(args...);
    }

   private:
    friend class Kernel;
    Call(const Kernel& kernel, int type, Fn* fn) : kernel_(kernel), type_(type), fn_(fn) {}
    const Kernel& kernel_;
    int type_;
    Fn* fn_;
  };

  Call operator[](Device device) const {
    const int type = static_cast<int>(device.type);
    if (!detail::device_checked[type].load(std::memory_order_relaxed)) [[unlikely]]
      detail::run_device_check(device.type);
    Fn* fn = slots_[type];
    if (!fn) [[unlikely]]
      missing(device);
    return Call(*this, type, fn);
  }

 private:
  [[noreturn]] void missing(Device device) const;

  const char* name_;
  uint32_t writes_;
  bool stageable_;
  std::array<Fn*, kNumDeviceTypes> slots_{};
  std::array<SixteenBit, kNumDeviceTypes> native_{};
};

// Whether any kernel was registered for `type`: tells "built without CUDA" from "this op has no
// CUDA kernel yet" in the error for an empty slot.
bool backend_registered(DeviceType type);
void note_registration(DeviceType type);

template <class R, class... Args>
void Kernel<R(Args...)>::missing(Device device) const {
  EMBER_FAIL("[", name_, "] has no ", device.is_cuda() ? "CUDA" : "CPU", " kernel",
             backend_registered(device.type) ? " yet" : device.is_cuda() ? " (built without CUDA)" : "");
}

// Registers `fn` into `kernel` for `type` during static initialisation:
//   static const bool registered = kernels::add_kernel(kernels::fill, DeviceType::CPU, &fill_cpu);
// A kernel that computes on bfloat16 or float16 itself says so (SixteenBit::BFloat16, ...).
template <class Fn>
bool add_kernel(Kernel<Fn>& kernel, DeviceType type, Fn* fn, SixteenBit native = SixteenBit::ThroughFloat32) {
  kernel.set(type, fn, native);
  note_registration(type);
  return true;
}

}  // namespace ember::kernels

#include "core/through_float32.h"  // the definitions of detail::through_float32 and sixteen_bit_dtype
