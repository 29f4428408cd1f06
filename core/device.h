#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

// Note [Enums from callers]
// An enum a caller passes may hold any value of its underlying type (a cast from an int, a value
// read from a file or sent by another rank). Where ember indexes a table with one (a kernel slot
// per device type, autocast's state per device) a value past the enumerators would read past the
// table, so each is checked where it enters: a Device when it is made, a DType when a
// TensorOptions is, the others at the function that takes them. The error names the op and the
// value.
[[noreturn]] void unknown_device_type(DeviceType t);

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {
    if (static_cast<int>(t) >= kNumDeviceTypes) unknown_device_type(t);
  }
  // "cpu", "cuda", "cuda:1"
  explicit Device(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // the spec Device(spec) parses: "cpu", "cuda:1"
};

inline constexpr Device kCPU{DeviceType::CPU, 0};
inline constexpr Device kCUDA{DeviceType::CUDA, 0};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace ember
