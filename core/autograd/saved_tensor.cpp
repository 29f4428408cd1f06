#include "core/autograd/saved_tensor.h"

#include <vector>

#include "core/check.h"
#include "core/memory_category.h"

namespace ember::autograd {

namespace {
thread_local std::vector<std::shared_ptr<SavedTensorHooks>> hook_stack;
thread_local const std::string* packing_op = nullptr;
const std::string kNoOp;
}  // namespace

const std::string& saving_op_name() { return packing_op ? *packing_op : kNoOp; }

SavedTensorHooksGuard::SavedTensorHooksGuard(SavedTensorHooks hooks) {
  hook_stack.push_back(std::make_shared<SavedTensorHooks>(std::move(hooks)));
}

SavedTensorHooksGuard::~SavedTensorHooksGuard() { hook_stack.pop_back(); }

SavedTensor::SavedTensor(const Tensor& t, std::string op_name) : op_name_(std::move(op_name)) {
  if (!t.defined()) return;
  defined_ = true;
  shape_ = t.shape();
  dtype_ = t.dtype();
  version_counter_ = t.storage()->version_counter();
  saved_version_ = version_counter_->value;
  if (!hook_stack.empty()) {
    hooks_ = hook_stack.back();
    const std::string* outer = packing_op;
    packing_op = &op_name_;
    try {
      packed_ = hooks_->pack(t.detach());
    } catch (...) {  // a hook may throw (checkpointing's early stop does)
      packing_op = outer;
      throw;
    }
    packing_op = outer;
  } else {
    data_ = t.detach();
    detail::tag_saved(data_);
  }
}

Tensor SavedTensor::unpack() const {
  if (!defined_) return Tensor();
  EMBER_CHECK(!released_, "[", op_name_,
              "] trying to backward through the graph a second time (its saved tensors were freed "
              "after the first backward); pass retain_graph=true to the first backward");
  EMBER_CHECK(version_counter_->value == saved_version_, "[", op_name_,
              "] a tensor saved for backward by ", op_name_, " was modified in place (version ",
              version_counter_->value, ", expected ", saved_version_, ")");
  return hooks_ ? hooks_->unpack(packed_) : data_;
}

void SavedTensor::release() {
  data_ = Tensor();
  packed_.reset();
  hooks_.reset();
  released_ = true;
}

}  // namespace ember::autograd
