#pragma once
// Note [Saved tensors and versions]
// A node keeps what its backward needs in SavedTensors. Saving records the storage's version
// counter; every in-place op bumps it, so if a saved tensor was overwritten before backward,
// unpack() throws instead of silently computing a wrong gradient.
//
// A saved tensor holds a *detached* alias of the data: a node that saves its own output must not
// own that output's grad_fn (itself), or output -> node -> output would be a cycle never freed.
//
// Note [Saved-tensor hooks]
// A thread-local stack of (pack, unpack) pairs. When one is active, saving calls pack(tensor)
// and keeps only what pack returned; backward calls unpack(packed) to get the tensor back.
// Activation checkpointing is built on this: pack keeps a small handle, unpack recomputes.
#include <any>
#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace ember::autograd {

struct SavedTensorHooks {
  std::function<std::any(const Tensor&)> pack;
  std::function<Tensor(const std::any&)> unpack;
};

// Pushes hooks for the guard's lifetime; the innermost active hooks apply.
class SavedTensorHooksGuard {
 public:
  explicit SavedTensorHooksGuard(SavedTensorHooks hooks);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

// The name of the op whose tensor is being packed: valid inside a pack hook, so a hook can
// decide by op (selective checkpointing) or report which op saved what.
const std::string& saving_op_name();

class SavedTensor {
 public:
  SavedTensor(const Tensor& t, std::string op_name);
  Tensor unpack() const;
  void release();

  // What was saved, without unpacking it (which could recompute): for pictures of the graph.
  bool defined() const { return defined_; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  bool packed() const { return hooks_ != nullptr; }  // held by saved-tensor hooks, not by the node
  bool released() const { return released_; }

 private:
  std::string op_name_;
  Shape shape_;
  DType dtype_ = DType::Float32;
  Tensor data_;                              // without hooks
  std::any packed_;                          // with hooks
  std::shared_ptr<SavedTensorHooks> hooks_;  // with hooks
  std::shared_ptr<VersionCounter> version_counter_;
  uint64_t saved_version_ = 0;
  bool defined_ = false;
  bool released_ = false;
};

}  // namespace ember::autograd
