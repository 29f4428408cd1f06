// Note [The backward engine]
// 1. Walk the graph from the roots and count, for every node, how many edges point at it.
// 2. Seed the roots' input buffers with the output gradients.
// 3. Repeatedly take a ready node (all its dependencies delivered), highest sequence number
//    first, i.e. the reverse of the order the forward created them. Its input gradients are now
//    complete: run the hooks of the tensors they belong to (Note [Tensor hooks]), then the node
//    (a FunctionNode fits what its backward returns to the inputs' shapes: Note [Gradient
//    shapes]). Free its saved tensors (unless retain_graph), and add each gradient it returns
//    into the input buffer of the node at the other end of the edge; a gradient that arrives
//    twice at one input is summed there. A node whose last dependency arrives becomes ready.
// 4. Once no node is left, run the callbacks queued during the run (Note [End-of-backward
//    callbacks] in engine.h).
// Freeing saved tensors as soon as their node ran is what makes live memory fall during the
// backward instead of staying at the forward's peak until the end.
#include "core/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/hooks.h"
#include "core/autograd/node.h"
#include "core/autograd/op_label.h"
#include "core/memory_category.h"
#include "core/ops.h"
#include "core/scoped_value.h"

namespace ember::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
// The callbacks of the innermost backward running on this thread (Note [End-of-backward callbacks]).
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;
// Whether the innermost backward running on this thread frees what its nodes saved.
thread_local bool frees_graph = false;
}

bool backward_frees_graph() { return frees_graph; }

void queue_callback(std::function<void()> fn) {
  EMBER_CHECK(current_callbacks, "[queue_callback] called outside a backward: a callback runs when the backward "
              "now running finishes");
  EMBER_CHECK(fn, "[queue_callback] the callback is empty");
  current_callbacks->push_back(std::move(fn));
}

Node::Node(bool accumulates_into_leaf)
    : sequence_nr(next_sequence_nr.fetch_add(1)),
      region(current_graph_region()),
      accumulates_into_leaf(accumulates_into_leaf) {}

// Note [Destroying long graphs]
// A node owns the nodes behind its edges, so dropping the last tensor of a chain of a million ops
// would destroy them one inside the other's destructor, a million frames deep: a stack overflow
// well before that (ASan's larger frames overflow near 100,000). Instead, the outermost
// destruction on a thread takes over the edges of every node that dies while it runs and
// releases them one at a time from a list, so each node dies at the same depth. Saved tensors
// hold the same nodes through their grad_fn, but a FunctionNode's saved tensors go before its
// edges (its members are destroyed before Node's), so the edge still holds the previous node
// when they do and the list is what releases it.
namespace {
thread_local std::vector<std::shared_ptr<Node>>* dying_edges = nullptr;
}

Node::~Node() {
  if (dying_edges) {
    for (Edge& e : next)
      if (e.node) dying_edges->push_back(std::move(e.node));
    return;
  }
  std::vector<std::shared_ptr<Node>> list;
  for (Edge& e : next)
    if (e.node) list.push_back(std::move(e.node));
  if (list.empty()) return;
  dying_edges = &list;
  while (!list.empty()) {
    std::shared_ptr<Node> n = std::move(list.back());
    list.pop_back();
    n.reset();  // when it is the last owner, n's destructor appends n's edges to the list
  }
  dying_edges = nullptr;
}

// Note [Taking over the incoming gradient]
// A leaf's first gradient would be a copy of the tensor the last backward formula made, and every
// later one a new sum: one parameter-sized buffer more than needed, alive at the same time as the
// one it replaces, and a pass over memory for nothing. When no one else holds the incoming
// tensor — this is its only handle and its storage's only view, a whole contiguous buffer — no
// one can observe it, so it becomes .grad as it is; likewise a .grad that only its leaf holds is
// summed into in place. Anything visible elsewhere (a seed the caller passed, a tensor a hook
// kept, a formula's output that is also saved for a later node, a .grad the caller holds) keeps
// the copying behaviour, so results and aliasing are the same either way. A backward formula may
// use the same test on its incoming gradient (gradient_is_reusable): softmax's writes its result
// over it, which in attention's backward saves a buffer of the scores' size at the peak.
namespace {
bool held_only_here(const Tensor& t) { return t.impl_ptr().use_count() == 1 && sole_tensor_on_its_memory(t); }
}  // namespace

bool sole_tensor_on_its_memory(const Tensor& t) {
  return t.storage().use_count() == 1 && t.is_contiguous() && t.offset() == 0 && t.nbytes() == t.storage()->nbytes();
}

bool gradient_is_reusable(const Tensor& g) { return g.defined() && !g.requires_grad() && held_only_here(g); }

void accumulate_grad(TensorImpl& t, Tensor&& g) {
  if (t.grad.defined() && held_only_here(t.grad)) {
    t.grad.add_(g);  // in place: its storage is tagged already
    return;
  }
  t.grad = !t.grad.defined() ? (held_only_here(g) ? std::move(g) : g.clone()) : t.grad + g;
  memory::tag(t.grad, MemoryCategory::Gradients);  // Note [Memory by category]
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  if (grads[0].defined()) accumulate_grad(*leaf, std::move(grads[0]));
  return {};
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return Edge{impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return Edge{};
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

namespace {

struct ByPriority {
  bool operator()(const Node* a, const Node* b) const {
    // AccumulateGrad first, so leaf gradients land (and buffers free) as early as possible.
    if (a->accumulates_into_leaf != b->accumulates_into_leaf) return b->accumulates_into_leaf;
    return a->sequence_nr < b->sequence_nr;
  }
};

void accumulate_into(Tensor& slot, const Tensor& g) { slot = slot.defined() ? slot + g : g; }

// The nodes with a path to one of `targets` (a target itself only when it leads to another):
// all that autograd::grad has to run.
std::unordered_set<Node*> nodes_leading_to(const std::vector<Edge>& roots, const std::vector<Edge>& targets) {
  std::unordered_set<Node*> target_set, needed, done;
  for (const Edge& t : targets) target_set.insert(t.node.get());
  // Iterative post-order: a node is needed when one of its children is.
  std::vector<std::pair<Node*, size_t>> stack;
  for (const Edge& r : roots)
    if (r.valid() && done.insert(r.node.get()).second) stack.emplace_back(r.node.get(), 0);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->next.size()) {
      Node* child = node->next[next++].node.get();
      if (child && done.insert(child).second) stack.emplace_back(child, 0);
      continue;
    }
    for (const Edge& e : node->next)
      if (e.valid() && (target_set.count(e.node.get()) || needed.count(e.node.get()))) needed.insert(node);
    stack.pop_back();
  }
  return needed;
}

// Runs the graph. With `captures` (autograd::grad), gradients arriving at the listed
// (node, input) pairs are stored in `captured`, and only the nodes leading to them run
// (AccumulateGrad never does: grad() leaves .grad alone).
void run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool retain_graph,
         const std::vector<Edge>* captures, std::vector<Tensor>* captured) {
  NoGradGuard no_grad;
  const AutocastRestore no_autocast(autocast_off());  // Note [Autocast]: gradients in the forward's dtypes
  OpLabelGuard in_backward(nullptr, true);  // frees between nodes count as backward too
  std::vector<std::function<void()>> callbacks;
  ScopedValue<std::vector<std::function<void()>>*> callbacks_of_this_run(current_callbacks, &callbacks);
  ScopedValue<bool> freeing(frees_graph, !retain_graph);
  std::unordered_map<Node*, int> dependencies;
  {
    std::vector<Node*> stack;
    std::unordered_map<Node*, bool> seen;
    for (const Edge& e : roots)
      if (e.valid() && !seen[e.node.get()]) {
        seen[e.node.get()] = true;
        stack.push_back(e.node.get());
      }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next) {
        if (!e.valid()) continue;
        ++dependencies[e.node.get()];
        if (!seen[e.node.get()]) {
          seen[e.node.get()] = true;
          stack.push_back(e.node.get());
        }
      }
    }
  }

  std::unordered_set<Node*> needed;
  if (captures) needed = nodes_leading_to(roots, *captures);

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto buffer_of = [&](Node* n) -> std::vector<Tensor>& {
    auto& b = buffers[n];
    if (b.empty()) b.resize(static_cast<size_t>(n->num_outputs()));
    return b;
  };
  std::priority_queue<Node*, std::vector<Node*>, ByPriority> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    accumulate_into(buffer_of(roots[i].node.get())[roots[i].input_nr], root_grads[i]);
  }
  for (const Edge& e : roots)
    if (e.valid() && dependencies[e.node.get()] == 0) {
      dependencies[e.node.get()] = -1;  // queued
      ready.push(e.node.get());
    }

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> inputs = std::move(buffer_of(node));
    buffers.erase(node);
    run_tensor_hooks(*node, inputs);
    if (captures) {
      for (size_t c = 0; c < captures->size(); ++c)
        if ((*captures)[c].node.get() == node) (*captured)[c] = inputs[(*captures)[c].input_nr];
      // A node that leads to no capture is not run; its children then never become ready,
      // which is right: none of them leads to a capture either.
      if (node->accumulates_into_leaf || !needed.count(node)) continue;
    }
    bool any_defined = false;
    for (const Tensor& g : inputs) any_defined |= g.defined();
    std::vector<Tensor> outputs;
    if (any_defined) {
      OpLabelGuard label(node->name(), true);
      outputs = node->apply(std::move(inputs));
    }
    if (!retain_graph) node->release_saved();
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.valid()) continue;
      if (i < outputs.size() && outputs[i].defined()) accumulate_into(buffer_of(e.node.get())[e.input_nr], outputs[i]);
      if (--dependencies[e.node.get()] == 0) ready.push(e.node.get());
    }
  }
  // By index: a callback may queue another, which push_back may move the vector for.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> fn = std::move(callbacks[i]);
    fn();
  }
}

std::vector<Edge> root_edges(const std::vector<Tensor>& outputs, const char* api) {
  std::vector<Edge> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    EMBER_CHECK(t.defined(), "[", api, "] output ", i, " is an undefined tensor");
    EMBER_CHECK(t.requires_grad(), "[", api, "] element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    roots.push_back(gradient_edge(t));
  }
  return roots;
}

std::vector<Tensor> seed_gradients(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& grad_outputs, const char* api) {
  EMBER_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "[", api, "] got ",
              grad_outputs.size(), " gradient(s) for ", outputs.size(), " output(s)");
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      EMBER_CHECK(out.numel() == 1, "[", api, "] grad can be implicitly created only for scalar "
                  "outputs, got an output of shape ", shape_str(out.shape()));
      g = ones(out.shape(), TensorOptions(out.dtype()).with_device(out.device()));
    } else {
      EMBER_CHECK(g.shape() == out.shape(), "[", api, "] gradient of shape ", shape_str(g.shape()),
                  " does not match output ", i, " of shape ", shape_str(out.shape()));
      EMBER_CHECK(g.dtype() == out.dtype() && g.device() == out.device(), "[", api, "] gradient is ",
                  g.dtype(), " on ", g.device(), " but output ", i, " is ", out.dtype(), " on ",
                  out.device());
    }
    seeds.push_back(g);
  }
  return seeds;
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph) {
  std::vector<Edge> roots = root_edges(outputs, "backward");
  run(roots, seed_gradients(outputs, grad_outputs, "backward"), retain_graph, nullptr, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  std::vector<Edge> roots = root_edges(outputs, "autograd::grad");
  std::vector<Edge> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "[autograd::grad] input ", i,
                " does not require grad");
    captures.push_back(gradient_edge(inputs[i]));
  }
  std::vector<Tensor> captured(inputs.size());
  run(roots, seed_gradients(outputs, grad_outputs, "autograd::grad"), retain_graph, &captures, &captured);
  for (size_t i = 0; i < inputs.size(); ++i)
    EMBER_CHECK(captured[i].defined(), "[autograd::grad] input ", i, " (shape ",
                shape_str(inputs[i].shape()), ") is not reachable from the outputs");
  return captured;
}

}  // namespace ember::autograd
