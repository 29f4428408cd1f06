#pragma once
// What the checkpoint planner plans over: layers run one after another, each on the previous one's
// output. A ModuleList (or Sequential) is one, its modules called with one tensor; a chain can
// also be made of functions, for layers that take more than the running tensor: an encoder
// layer's forward(h, mask) is the link [&layer, &mask](const Tensor& h) { return layer(h, mask); }
// (Note [Chains of layers]).
#include <functional>
#include <string>
#include <vector>

#include "nn/module_list.h"

namespace ember::utils {

// Note [Chains of layers]
// The planner's tools (profile_layers, plan_checkpoints' run_plan, plan_selective,
// checkpoint_sequential) only ever need three things of a model's layers: how many there are,
// how to run each one on a tensor, and the parameters they use (a profile sets their .grad aside
// and puts it back). A LayerChain is exactly that. A link that binds more than its input, such
// as a mask, must read it when it runs, not when the chain is made: a checkpointed segment runs
// its links again in backward, and the chain is made once while the masks change every batch.
// Functions that keep a segment's links for a later backward copy them, so a chain made on the
// spot from a ModuleList (the conversion below) may go away after the call.
struct LayerChain {
  struct Link {
    std::string name;                              // what profiles and errors call it
    std::function<Tensor(const Tensor&)> forward;  // runs the layer on the previous one's output
  };
  std::vector<Link> links;
  std::vector<Tensor> parameters;  // every parameter the links use

  LayerChain() = default;
  LayerChain(std::vector<Link> links, std::vector<Tensor> parameters);
  // seq's modules as links (each called with one tensor), and seq's parameters.
  LayerChain(nn::ModuleList& seq);  // NOLINT(google-explicit-constructor): a module list is a chain

  size_t size() const { return links.size(); }
  // Links [begin, end) run in order, as one function that holds copies of them.
  std::function<Tensor(const Tensor&)> segment(size_t begin, size_t end) const;
};

}  // namespace ember::utils
