// The cuDNN switch (Note [cuDNN or ember's kernels] in cuda/cudnn/api.h), in every CUDA build.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "cuda/cudnn/api.h"

namespace ember::cuda {
namespace {

// -1: not overridden (EMBER_CUDNN decides), else 0 or 1 from set_cudnn_enabled.
std::atomic<int> override_switch{-1};
std::atomic<int64_t> calls{0};

}  // namespace

bool parse_cudnn_switch(const char* value) {
  if (!value) return true;
  std::string v(value);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (v.empty() || v == "1" || v == "on" || v == "true" || v == "auto") return true;
  if (v == "0" || v == "off" || v == "false") return false;
  EMBER_FAIL("[cuda] EMBER_CUDNN must be 1/on/auto (cuDNN where available) or 0/off (ember's kernels), got '", value,
             "'");
}

void set_cudnn_enabled(bool enabled) { override_switch.store(enabled ? 1 : 0); }

bool cudnn_requested() {
  if (const int o = override_switch.load(); o >= 0) return o == 1;
  static const bool from_environment = parse_cudnn_switch(std::getenv("EMBER_CUDNN"));
  return from_environment;
}

CudnnSwitchGuard::CudnnSwitchGuard(bool enabled) : before_(override_switch.load()) { set_cudnn_enabled(enabled); }
CudnnSwitchGuard::~CudnnSwitchGuard() { override_switch.store(before_); }

int64_t cudnn_calls() { return calls.load(); }

void cudnn::note_call() { calls.fetch_add(1, std::memory_order_relaxed); }

}  // namespace ember::cuda
