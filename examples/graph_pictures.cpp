// Writes the backward graphs that docs/internals.md shows, as Graphviz DOT (autograd::to_dot):
//   graph_mlp.dot         the training step of chapter 7: matmul, add, relu, matmul, add,
//                         cross_entropy, before backward, so every saved tensor is still there
//   graph_checkpoint.dot  the same kind of network with its middle block checkpointed
//   ./graph_pictures OUT_DIR
// `make docs-graphs` runs it and renders both files to docs/*.svg with `dot -Tsvg`.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/autograd/to_dot.h"
#include "core/generator.h"
#include "core/ops.h"
#include "utils/checkpoint.h"

using namespace ember;

namespace {

Tensor parameter(const Shape& shape) { return (randn(shape) * 0.1).requires_grad_(); }

// Chapter 7's step: x [8, 20] -> 16 -> 5 classes.
Tensor mlp_loss() {
  Tensor w1 = parameter({20, 16}), b1 = parameter({16}), w2 = parameter({16, 5}), b2 = parameter({5});
  Tensor x = randn({8, 20}), target = randint(0, 5, {8});
  return cross_entropy(matmul(relu(matmul(x, w1) + b1), w2) + b2, target);
}

// x [8, 20] -> 16, then a checkpointed block of two 16 -> 16 layers, then -> 5 classes.
Tensor checkpointed_loss() {
  Tensor w1 = parameter({20, 16}), wa = parameter({16, 16}), wb = parameter({16, 16}), w2 = parameter({16, 5});
  Tensor x = randn({8, 20}), target = randint(0, 5, {8});
  auto block = [&](const Tensor& h) { return relu(matmul(relu(matmul(h, wa)), wb)); };
  return cross_entropy(matmul(utils::checkpoint(block, relu(matmul(x, w1))), w2), target);
}

bool write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (out) return true;
  std::fprintf(stderr, "graph_pictures: cannot write %s\n", path.string().c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: graph_pictures OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  manual_seed(0);
  const bool ok = write(dir / "graph_mlp.dot", autograd::to_dot(mlp_loss())) &&
                  write(dir / "graph_checkpoint.dot", autograd::to_dot(checkpointed_loss()));
  return ok ? 0 : 1;
}
