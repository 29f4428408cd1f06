#include "core/device.h"

#include <charconv>
#include <limits>

#include "core/check.h"

namespace ember {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    *this = kCPU;
  } else if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (spec.size() > 4) {
      // from_chars, unlike std::stoi, reports a bad or out-of-range number instead of throwing a
      // standard exception; the whole rest must be the number ("cuda:1x" is not cuda:1).
      const char* first = spec.data() + 5;
      const char* last = spec.data() + spec.size();
      const auto [end, error] = std::from_chars(first, last, index);
      EMBER_CHECK(spec[4] == ':' && first != last && *first != '-' && error == std::errc() && end == last,
                  "[device] cannot parse device '", spec, "' (expected cpu, cuda or cuda:N with N in [0, ",
                  std::numeric_limits<int>::max(), "])");
    }
  } else {
    EMBER_FAIL("[device] cannot parse device '", spec, "' (expected cpu, cuda or cuda:N)");
  }
}

void unknown_device_type(DeviceType t) {
  EMBER_FAIL("[device] unknown device type ", static_cast<int>(t), " (expected one of its ", kNumDeviceTypes,
             " values, CPU = 0 and CUDA = 1)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace ember
