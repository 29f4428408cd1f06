// Tensor::str and operator<<: a tensor printed the way PyTorch prints it (one width for every
// element, summarized with "..." past 1000 elements).
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/autograd/node.h"

namespace ember {

namespace {

struct Formatter {
  bool floating;
  bool integral_values = true;
  bool scientific = false;
  int width = 1;

  std::string format(double v) const {
    char buf[64];
    if (!floating) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else if (std::isnan(v)) std::snprintf(buf, sizeof buf, "nan");
    else if (std::isinf(v)) std::snprintf(buf, sizeof buf, v > 0 ? "inf" : "-inf");
    else if (scientific) std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (integral_values) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
};

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

void print_rec(std::ostringstream& os, const Tensor& t, const std::vector<double>& values,
               const Shape& strides, int64_t base, size_t depth, const Formatter& f, bool summarize) {
  const Shape& shape = t.shape();
  if (depth == shape.size()) {
    std::string s = f.format(values[static_cast<size_t>(base)]);
    os << std::string(static_cast<size_t>(std::max<int>(0, f.width - static_cast<int>(s.size()))), ' ') << s;
    return;
  }
  int64_t n = shape[depth];
  bool cut = summarize && n > 2 * kEdgeItems;
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) {
      os << (depth + 1 == shape.size() ? "..., " : "...,\n" + std::string(7 + depth + 1, ' '));
      i = n - kEdgeItems;
    }
    print_rec(os, t, values, strides, base + i * strides[depth], depth + 1, f, summarize);
    if (i + 1 < n) {
      if (depth + 1 == shape.size()) {
        os << ", ";
      } else {
        os << ',' << std::string(shape.size() - depth - 1, '\n') << std::string(7 + depth + 1, ' ');
      }
    }
  }
  os << ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> values = to_vector<double>();
  Formatter f{is_floating(dtype())};
  double max_abs = 0, min_abs = INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    if (v != std::floor(v)) f.integral_values = false;
    max_abs = std::max(max_abs, std::fabs(v));
    if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
  }
  f.scientific = f.floating && (max_abs >= 1e8 || (!f.integral_values && min_abs < 1e-4));
  for (double v : values) f.width = std::max(f.width, static_cast<int>(f.format(v).size()));

  std::ostringstream os;
  os << "tensor(";
  if (dim() == 0) {
    os << f.format(values[0]);
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_rec(os, *this, values, contiguous_strides(shape()), 0, 0, f, numel() > kSummarizeAbove);
  }
  if (numel() == 0 && dim() > 1) os << ", size=" << shape_str(shape());
  if (dtype() != kFloat32 && dtype() != kInt64) os << ", dtype=" << dtype_name(dtype());
  if (device().is_cuda()) os << ", device='" << device().str() << "'";
  if (grad_fn()) os << ", grad_fn=<" << grad_fn()->name() << ">";
  else if (requires_grad()) os << ", requires_grad=True";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ember
