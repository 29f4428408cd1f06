// Note [Graph pictures]
// to_dot walks the graph breadth-first from the tensor's node, following each node's `next`
// edges in order, and numbers the nodes n0, n1, ... as it first meets them: the same graph
// always gives the same text, so tests compare it whole. Edges point the way the graph does,
// from a node to the nodes its inputs' gradients go to (the forward's arrows reversed).
//
// What a box says comes from the node alone: its name(), and per saved tensor the shape, dtype
// and size recorded when it was saved (SavedTensor's description; unpacking could recompute).
// A saved tensor is "packed" when saved-tensor hooks hold it instead of the node (checkpointing
// keeps a handle and recomputes the bytes in backward), "freed" once its node ran in a backward
// without retain_graph. Sizes are the view's elements times the element size: two nodes saving
// views of one storage each show their own view. Nodes recorded inside a graph region (Note
// [Graph regions]; utils::checkpoint opens one) are drawn inside a dashed box named after it;
// leaves never are.
#include "core/autograd/to_dot.h"

#include <map>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "core/autograd/node.h"
#include "core/autograd/saved_tensor.h"
#include "core/check.h"

namespace ember::autograd {

namespace {

std::string describe(const Shape& shape, DType dtype) {
  std::ostringstream out;
  out << shape_str(shape) << " " << dtype;
  return out.str();
}

std::string saved_line(const SavedTensor& s) {
  std::ostringstream out;
  out << "saved " << describe(s.shape(), s.dtype()) << " "
      << static_cast<int64_t>(element_size(s.dtype())) * numel_of(s.shape()) << " B";
  if (s.released()) {
    out << " (freed)";
  } else if (s.packed()) {
    out << " (packed)";
  }
  return out.str();
}

// A DOT node statement; `label` lines are joined with DOT's newline escape.
std::string node_line(const std::string& id, const std::vector<std::string>& label, const char* attributes) {
  std::ostringstream out;
  out << id << " [label=\"";
  for (size_t i = 0; i < label.size(); ++i) out << (i ? "\\n" : "") << label[i];
  out << "\"" << attributes << "];\n";
  return out.str();
}

std::string node_statement(const Node& node, const std::string& id) {
  if (const auto* leaf = dynamic_cast<const AccumulateGrad*>(&node))
    return node_line(id, {"leaf " + describe(leaf->leaf->shape, leaf->leaf->dtype)}, ", shape=ellipse");
  std::vector<std::string> label{node.name()};
  if (const std::vector<SavedTensor>* saved = node.saved_tensors())
    for (const SavedTensor& s : *saved)
      if (s.defined()) label.push_back(saved_line(s));
  return node_line(id, label, "");
}

}  // namespace

std::string to_dot(const Tensor& t) {
  EMBER_CHECK(t.defined(), "[to_dot] expects a defined tensor");
  std::ostringstream out;
  out << "digraph backward {\n"
      << "  graph [fontname=\"Helvetica\", fontsize=10];\n"
      << "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
      << "  " << node_line("tensor", {"tensor " + describe(t.shape(), t.dtype())}, ", shape=ellipse, style=bold");

  const Edge root = t.requires_grad() ? gradient_edge(t) : Edge{};
  std::vector<const Node*> order;
  std::unordered_map<const Node*, size_t> number;
  std::queue<const Node*> pending;
  auto visit = [&](const Node* n) {
    if (number.emplace(n, order.size()).second) {
      order.push_back(n);
      pending.push(n);
    }
  };
  if (root.valid()) visit(root.node.get());
  while (!pending.empty()) {
    const Node* n = pending.front();
    pending.pop();
    for (const Edge& e : n->next)
      if (e.valid()) visit(e.node.get());
  }
  auto id = [&](const Node* n) {
    std::string name = "n";  // appended, not "n" + ...: GCC 12's -Wrestrict misfires on that at -O3
    name += std::to_string(number.at(n));
    return name;
  };

  // Nodes outside every region first, then one cluster per region in order of first appearance.
  std::map<size_t, std::vector<const Node*>> regions;  // first node's number -> the region's nodes
  std::unordered_map<uint64_t, size_t> region_key;
  for (const Node* n : order) {
    // A leaf's sink is made where the leaf is first used, maybe inside a region, but it belongs
    // to the leaf, which no region recomputes.
    if (n->region.id == 0 || dynamic_cast<const AccumulateGrad*>(n)) {
      out << "  " << node_statement(*n, id(n));
      continue;
    }
    auto [it, fresh] = region_key.emplace(n->region.id, number.at(n));
    regions[it->second].push_back(n);
  }
  for (const auto& [first, nodes] : regions) {
    out << "  subgraph cluster_" << first << " {\n"
        << "    label=\"" << nodes.front()->region.name << "\"; style=dashed;\n";
    for (const Node* n : nodes) out << "    " << node_statement(*n, id(n));
    out << "  }\n";
  }

  if (root.valid()) out << "  tensor -> " << id(root.node.get()) << ";\n";
  for (const Node* n : order)
    for (const Edge& e : n->next)
      if (e.valid()) out << "  " << id(n) << " -> " << id(e.node.get()) << ";\n";
  out << "}\n";
  return out.str();
}

}  // namespace ember::autograd
