#pragma once
// Exercise 5: a checkpointed segment, the trade of compute for memory.
//
// checkpoint_segment(fn, inputs) returns fn(inputs), but keeps none of the activations fn's ops
// would save for backward: it saves only the inputs, and in backward runs fn again, this time
// recording a graph, and backpropagates g through that graph. The gradients must be those of
// fn(inputs) itself, bit for bit, Dropout included: fn may draw random numbers, so the backward
// must replay them (docs/internals.md, chapter 6, "State = (seed, offset), and reserve()").
//
// Everything the segment differentiates must be among `inputs`: a weight fn captures and does
// not take as an input gets no gradient. (ember's utils::checkpoint does this with saved-tensor
// hooks instead, which needs no such rule: docs/checkpointing.md.)
//
// You write CheckpointSegment::forward and ::backward in exercises/ex5_checkpoint.cpp.
#include <functional>
#include <utility>
#include <vector>

#include <ember/ember.h>

namespace ember::exercises {

using Segment = std::function<Tensor(const std::vector<Tensor>&)>;

struct CheckpointSegment : autograd::Function<CheckpointSegment> {
  static constexpr const char* name = "exercise_checkpoint";
  struct State {
    Segment fn;
    std::vector<std::pair<Device, GeneratorState>> rng;  // the generators as the forward found them
    std::vector<autograd::SavedRef> inputs;                // what Ctx::save returned for each input
  };
  // yours: run the segment without keeping its activations, and remember what backward needs
  static Tensor forward(autograd::Ctx& c, State& s, const Segment& fn, const std::vector<Tensor>& inputs);
  // yours: recompute the segment with a graph and return one gradient per input
  static autograd::Grads backward(autograd::Ctx& c, const State& s, const Tensor& g);
};

inline Tensor checkpoint_segment(const Segment& fn, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(fn, "[exercise_checkpoint] expects a function");
  for (size_t i = 0; i < inputs.size(); ++i)
    EMBER_CHECK(inputs[i].defined(), "[exercise_checkpoint] input ", i, " is undefined");
  return CheckpointSegment::apply(fn, inputs);
}

}  // namespace ember::exercises
