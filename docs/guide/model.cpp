// A model: layers as members, registered under the names state_dict uses.
#include <ember/ember.h>

#include <iostream>

using namespace ember;

struct Block : nn::Module {
  nn::Linear fc;
  nn::LayerNorm norm;
  Block(int64_t width) : fc(width, width), norm(width) {
    register_module("fc", fc);
    register_module("norm", norm);
  }
  Tensor forward(const Tensor& x) override { return x + gelu(fc(norm(x))); }  // a residual block
};

struct Net : nn::Module {
  nn::Linear stem{784, 128};
  nn::ModuleList blocks;  // owns its children; they are named "0", "1", ...
  nn::Dropout drop{0.1};
  nn::Linear head{128, 10};
  Net() {
    for (int i = 0; i < 3; ++i) blocks.add<Block>(128);
    register_module("stem", stem);
    register_module("blocks", blocks);
    register_module("drop", drop);
    register_module("head", head);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(stem(x.flatten(1)));
    for (nn::Module& block : blocks) h = block(h);
    return head(drop(h));
  }
};

int main() {
  manual_seed(0);
  Net net;
  std::cout << net << "\n";  // every layer with its settings, as PyTorch prints a model

  int64_t count = 0;
  for (const auto& [name, p] : net.named_parameters()) count += p.numel();
  std::cout << count << " parameters; the first block's weight is "
            << shape_str(net.state_dict().at("blocks.0.fc.weight").shape()) << "\n";

  Tensor logits = net(randn({32, 1, 28, 28}));  // training mode: Dropout is active
  net.eval();                                    // evaluation mode: Dropout passes through
  EMBER_CHECK(logits.shape() == Shape({32, 10}), "unexpected output shape ", shape_str(logits.shape()));
  return 0;
}
