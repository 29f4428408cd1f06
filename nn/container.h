#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

// Note [Owning containers]
// Most modules refer to children that are their own members (Note [Modules]). A container —
// Sequential, ModuleList, ModuleDict — instead creates its children on the heap, or takes the
// ones a factory made (std::unique_ptr), and keeps them alive itself, so a model can hold a
// number of blocks decided at run time. Container is that common part: adopt() registers a child
// under a name and keeps it with its name; it makes children from constructor arguments, takes
// unique_ptrs, checks a requested child type, and iterates. Subclasses decide the names ("0",
// "1", ... for a list, the user's keys for a dict) and how children are found again.
// A child is registered like any other, so named_parameters(), state_dict(), train(), to() and
// printing see it as they see a member ("blocks.0.attn.qkv.weight", "heads.policy.weight").
class Container : public Module {
 public:
  struct Entry {
    std::string name;
    std::shared_ptr<Module> module;
  };
  size_t size() const { return owned_.size(); }
  bool empty() const { return owned_.empty(); }

  // Walks the children in insertion order; Project turns an Entry into what the loop sees.
  template <class Project>
  class Iterator {
   public:
    explicit Iterator(std::vector<Entry>::const_iterator it) : it_(it) {}
    decltype(auto) operator*() const { return Project{}(*it_); }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator!=(const Iterator& o) const { return it_ != o.it_; }

   private:
    std::vector<Entry>::const_iterator it_;
  };

 protected:
  Container() = default;
  Module& adopt(const std::string& name, std::shared_ptr<Module> child);
  // adopt() for a child the container makes itself or is handed by a factory, typed.
  template <class M>
  M& adopt_typed(const std::string& name, std::shared_ptr<M> child) {
    M* raw = child.get();
    adopt(name, std::move(child));  // checks that child is not empty
    return *raw;
  }
  // The child as an M, or an error naming what it is (`which` says which child: "child 1").
  template <class M>
  M& as(Module& child, const std::string& which) const {
    auto* m = dynamic_cast<M*>(&child);
    EMBER_CHECK(m, "[", name(), "] ", which, " is a ", child.name(), ", not the requested type");
    return *m;
  }
  const std::vector<Entry>& owned() const { return owned_; }

 private:
  std::vector<Entry> owned_;
};

}  // namespace ember::nn
