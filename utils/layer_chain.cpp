#include "utils/layer_chain.h"

namespace ember::utils {

LayerChain::LayerChain(std::vector<Link> links, std::vector<Tensor> parameters)
    : links(std::move(links)), parameters(std::move(parameters)) {
  for (size_t i = 0; i < this->links.size(); ++i)
    EMBER_CHECK(static_cast<bool>(this->links[i].forward), "[LayerChain] link ", i, " ('", this->links[i].name,
                "') has no forward function");
}

LayerChain::LayerChain(nn::ModuleList& seq) : parameters(seq.parameters()) {
  for (size_t i = 0; i < seq.size(); ++i) {
    nn::Module& m = seq[i];
    links.push_back({m.name(), [&m](const Tensor& x) { return m(x); }});
  }
}

std::function<Tensor(const Tensor&)> LayerChain::segment(size_t begin, size_t end) const {
  EMBER_CHECK(begin <= end && end <= links.size(), "[LayerChain] segment [", begin, ",", end, ") is outside a chain of ",
              links.size(), " link(s)");
  std::vector<std::function<Tensor(const Tensor&)>> run;
  for (size_t i = begin; i < end; ++i) run.push_back(links[i].forward);
  return [run = std::move(run)](const Tensor& in) {
    Tensor h = in;
    for (const auto& link : run) h = link(h);
    return h;
  };
}

}  // namespace ember::utils
