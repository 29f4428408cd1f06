// Loading libcudnn.so.9 (Note [cuDNN loaded at run time] in cuda/cudnn/library.h) and the
// switch's answers for a build with cuDNN.
#include "cuda/cudnn/library.h"

#include <dlfcn.h>

#include <string>

#include "cuda/cudnn/api.h"

namespace ember::cuda {
namespace {

constexpr const char* kLibraryName = "libcudnn.so.9";

struct Loaded {
  CudnnLibrary functions{};
  bool ok = false;
  std::string why;      // when not ok
  size_t version = 0;   // cudnnGetVersion(): major * 10000 + minor * 100 + patch
};

Loaded load() {
  Loaded l;
  // Never closed: cuDNN's handles live until the process ends (as cuBLAS's, cuda/context.cpp).
  void* handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = dlerror();
    l.why = std::string(kLibraryName) + " not loaded (" + (error ? error : "not found") +
            "; put the folder that holds it, e.g. the CUDA toolkit's lib64, on LD_LIBRARY_PATH)";
    return l;
  }
  bool complete = true;
#define EMBER_CUDNN_LOAD(name)                                                          \
  l.functions.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));         \
  if (!l.functions.name && complete) {                                                  \
    complete = false;                                                                   \
    l.why = std::string("the loaded ") + kLibraryName + " has no " #name;               \
  }
  EMBER_CUDNN_FUNCTIONS(EMBER_CUDNN_LOAD)
#undef EMBER_CUDNN_LOAD
  if (!complete) return l;
  l.version = l.functions.cudnnGetVersion();
  if (l.version / 10000 != CUDNN_MAJOR) {
    l.why = std::string(kLibraryName) + " is cuDNN " + std::to_string(l.version) + ", ember was built with cuDNN " +
            std::to_string(CUDNN_MAJOR);
    return l;
  }
  l.ok = true;
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const CudnnLibrary* cudnn_library() { return loaded().ok ? &loaded().functions : nullptr; }

const CudnnLibrary& cudnn_api() {
  const CudnnLibrary* library = cudnn_library();
  EMBER_CHECK(library, "[cudnn] cuDNN is not available: ", loaded().why);
  return *library;
}

bool cudnn_active() { return cudnn_requested() && cudnn_library() != nullptr; }

std::string cudnn_status() {
  if (!cudnn_requested()) return "ember's kernels: EMBER_CUDNN=0 or set_cudnn_enabled(false)";
  const Loaded& l = loaded();
  if (!l.ok) return "ember's kernels: " + l.why;
  return "cuDNN " + std::to_string(l.version / 10000) + "." + std::to_string(l.version / 100 % 100) + "." +
         std::to_string(l.version % 100) + " (" + kLibraryName + ")";
}

}  // namespace ember::cuda
