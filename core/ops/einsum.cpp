// einsum: Einstein summation over one or more operands, built from permute, reshape, expand, sum,
// where and matmul, so its gradient and its devices are theirs (Note [einsum as matmuls]).
#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/autocast.h"
#include "core/ops.h"
#include "core/ops/helpers.h"
#include "core/system_memory.h"

namespace ember {

namespace {

// Note [einsum as matmuls]
// Subscripts become integer labels: 'A'..'Z' are 0..25 and 'a'..'z' 26..51 (so sorting labels
// sorts them as PyTorch does), and the dims an ellipsis covers become labels 52, 53, ...,
// aligned from the right across operands so that they broadcast. Each operand first gives up
// what only it has: a label repeated inside it becomes its diagonal, and a label that no other
// operand and not the output names is summed away. Then the operands are contracted from left to
// right. For a pair (A, B), the labels they share split into batch labels (still needed later:
// by the output or by a later operand) and contracted ones; A is permuted to [batch, A only,
// contracted] and B to [batch, contracted, B only], both reshaped to 3-D, and one batched matmul
// [N, I, K] x [N, K, J] does the pair (a broadcast product when nothing is contracted). Size-1
// dims broadcast against the other operands' sizes, as in PyTorch. Under CPU autocast the
// matmuls cast their operands (Note [Autocast]) and the rest computes in the dtypes it is given,
// so an einsum that contracts nothing between operands (a trace, a transpose, an outer product)
// stays in float32, as PyTorch's does; CUDA autocast casts every einsum's operands first.
constexpr int kLetters = 52;
constexpr int kMaxEllipsisDims = 64;
constexpr int kMaxLabels = kLetters + kMaxEllipsisDims;
constexpr int kEllipsisMark = -1;  // where "..." stands in a parsed subscript string

using Labels = std::vector<int>;

std::string label_name(int label) {
  if (label >= kLetters) return "... (dim " + std::to_string(label - kLetters) + ")";
  return std::string(1, static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)));
}

// The labels of the subscripts equation[begin, end) (one operand's, or the output's), with
// kEllipsisMark for "..."; messages give positions in the whole equation.
Labels parse_subscripts(const std::string& equation, size_t begin, size_t end) {
  Labels labels;
  for (size_t i = begin; i < end; ++i) {
    const char ch = equation[i];
    if (ch == ' ') continue;
    if (ch == '.') {
      EMBER_CHECK(i + 3 <= end && equation.compare(i, 3, "...") == 0, "[einsum] '.' at position ", i,
                  " of equation '", equation, "' is not part of an ellipsis '...'");
      EMBER_CHECK(std::find(labels.begin(), labels.end(), kEllipsisMark) == labels.end(),
                  "[einsum] more than one ellipsis in one operand's subscripts of equation '", equation, "'");
      labels.push_back(kEllipsisMark);
      i += 2;
    } else if (ch >= 'A' && ch <= 'Z') {
      labels.push_back(ch - 'A');
    } else if (ch >= 'a' && ch <= 'z') {
      labels.push_back(26 + (ch - 'a'));
    } else {
      EMBER_FAIL("[einsum] invalid character '", ch, "' at position ", i, " of equation '", equation,
                 "': subscripts are letters a-z, A-Z, with ',' between operands, '->' before the output and '...'");
    }
  }
  return labels;
}

bool has(const Labels& labels, int label) { return std::find(labels.begin(), labels.end(), label) != labels.end(); }

Labels joined(Labels a, const Labels& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Replaces the ellipsis mark by `covered` labels ending at kLetters + total - 1.
Labels expand_ellipsis(const Labels& subscripts, int64_t covered, int64_t total) {
  Labels out;
  for (int label : subscripts) {
    if (label != kEllipsisMark) {
      out.push_back(label);
      continue;
    }
    for (int64_t t = 0; t < covered; ++t) out.push_back(kLetters + static_cast<int>(total - covered + t));
  }
  return out;
}

// One operand on its way through the contraction: the tensor and the label of each of its dims.
struct Operand {
  Tensor t;
  Labels labels;
};

// The diagonal of dims p < q (equal sizes): elements with equal indices kept, then the sum over q.
Tensor diagonal(const Tensor& x, int64_t p, int64_t q) {
  const int64_t n = x.size(p);
  const TensorOptions options = TensorOptions(kInt64).with_device(x.device());
  Shape shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(p)] = n;
  shape[static_cast<size_t>(q)] = n;
  Tensor same = eq(arange(static_cast<double>(n), options).unsqueeze(1), arange(static_cast<double>(n), options));
  return sum(where(same.reshape(shape), x, ops::wrap_scalar(0.0, x)), {q});
}

void take_diagonals(Operand& op) {
  for (size_t p = 0; p < op.labels.size(); ++p) {
    for (size_t q = op.labels.size() - 1; q > p; --q) {
      if (op.labels[q] != op.labels[p]) continue;
      op.t = diagonal(op.t, static_cast<int64_t>(p), static_cast<int64_t>(q));
      op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(q));
    }
  }
}

// Sums the dims whose label is not in `needed`.
void sum_unneeded(Operand& op, const Labels& needed) {
  Shape dims;
  Labels kept;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (has(needed, op.labels[d])) {
      kept.push_back(op.labels[d]);
    } else {
      dims.push_back(static_cast<int64_t>(d));
    }
  }
  if (dims.empty()) return;
  op.t = sum(op.t, dims);
  op.labels = kept;
}

// a's dims permuted into the order of the groups' labels, then reshaped to one dim per group.
Tensor grouped(const Operand& a, const std::vector<Labels>& groups, const std::vector<int64_t>& size_of) {
  Shape perm, shape;
  for (const Labels& group : groups) {
    int64_t size = 1;
    for (int label : group) {
      perm.push_back(std::find(a.labels.begin(), a.labels.end(), label) - a.labels.begin());
      size *= size_of[static_cast<size_t>(label)];
    }
    shape.push_back(size);
  }
  return a.t.permute(perm).reshape(shape);
}

// The shape a set of labels gives.
Shape shape_of(const Labels& labels, const std::vector<int64_t>& size_of) {
  Shape shape;
  for (int label : labels) shape.push_back(size_of[static_cast<size_t>(label)]);
  return shape;
}

// A tensor einsum is about to make (its output, or the product of a pair) must be one that could
// be allocated at all: its bytes must not overflow int64, nor exceed the CPU's memory for a CPU
// tensor. Checked before the allocation, so an impossible equation fails at once, naming what it
// asked for, instead of after the system was asked for gigabytes.
void check_can_allocate(const Labels& labels, const std::vector<int64_t>& size_of, const Tensor& like,
                        const char* what, const std::string& equation) {
  const Shape shape = shape_of(labels, size_of);
  const std::optional<int64_t> n = try_numel(shape);
  const auto element = static_cast<int64_t>(element_size(like.dtype()));
  const bool overflows = !n || *n > INT64_MAX / element;
  const int64_t bytes = overflows ? 0 : *n * element, machine = memory::physical_memory_bytes();
  EMBER_CHECK(!overflows && !(like.device().is_cpu() && machine > 0 && bytes > machine), "[einsum] equation '", equation,
              "' needs ", what, " of shape ", shape_str(shape), " in ", like.dtype(),
              overflows ? std::string(", whose size overflows int64")
                        : detail::concat(" (", memory::format_bytes(bytes), "), more than this machine's ",
                                         memory::format_bytes(machine), " of memory"));
}

Operand contract(Operand a, Operand b, const Labels& needed_later, const std::vector<int64_t>& size_of,
                 const std::string& equation) {
  sum_unneeded(a, joined(needed_later, b.labels));
  sum_unneeded(b, joined(needed_later, a.labels));
  Labels batch, contracted, a_only, b_only;
  for (int label : a.labels) {
    if (!has(b.labels, label)) {
      a_only.push_back(label);
    } else {
      (has(needed_later, label) ? batch : contracted).push_back(label);
    }
  }
  for (int label : b.labels)
    if (!has(a.labels, label)) b_only.push_back(label);
  Operand out{Tensor(), joined(joined(batch, a_only), b_only)};
  check_can_allocate(out.labels, size_of, a.t, "an intermediate product", equation);
  const Tensor a3 = grouped(a, {batch, a_only, contracted}, size_of);
  const Tensor b3 = grouped(b, {batch, contracted, b_only}, size_of);
  const Tensor product = contracted.empty() ? a3 * b3 : matmul(a3, b3);  // [N, I, 1] * [N, 1, J]
  out.t = product.reshape(shape_of(out.labels, size_of));
  return out;
}

// The size of every label: a size-1 dim broadcasts against the other operands' size of its
// label; a label repeated inside one operand must have one size there (it takes a diagonal).
std::vector<int64_t> label_sizes(const std::vector<Operand>& parts, const std::string& equation) {
  std::vector<int64_t> size_of(kMaxLabels, 1);
  std::vector<size_t> source(kMaxLabels, 0);  // the operand that gave size_of its value
  for (size_t i = 0; i < parts.size(); ++i) {
    const Labels& labels = parts[i].labels;
    const Shape& shape = parts[i].t.shape();
    for (size_t d = 0; d < labels.size(); ++d) {
      for (size_t e = 0; e < d; ++e)
        EMBER_CHECK(labels[e] != labels[d] || shape[e] == shape[d], "[einsum] subscript ", label_name(labels[d]),
                    " is repeated in operand ", i, " of shape ", shape_str(shape), " with sizes ", shape[e], " and ",
                    shape[d], " (equation '", equation, "')");
      const auto label = static_cast<size_t>(labels[d]);
      if (shape[d] == 1) continue;
      EMBER_CHECK(size_of[label] == 1 || size_of[label] == shape[d], "[einsum] subscript ", label_name(labels[d]),
                  " has size ", size_of[label], " in operand ", source[label], " but size ", shape[d], " in operand ",
                  i, " of shape ", shape_str(shape), " (equation '", equation, "')");
      size_of[label] = shape[d];
      source[label] = i;
    }
  }
  return size_of;
}

// An equation read against its operands: each operand with its dims' labels, and the output's labels.
struct Parsed {
  std::vector<Operand> parts;
  Labels output;
};

Parsed parse(const std::string& equation, const std::vector<Tensor>& operands) {
  const size_t arrow = equation.find("->");
  EMBER_CHECK(arrow == std::string::npos || equation.find("->", arrow + 2) == std::string::npos,
              "[einsum] equation '", equation, "' has more than one '->'");
  const size_t lhs_end = arrow == std::string::npos ? equation.size() : arrow;

  // The operands' subscripts, one comma-separated term each.
  std::vector<Labels> terms;
  for (size_t begin = 0;;) {
    const size_t comma = std::min(equation.find(',', begin), lhs_end);
    terms.push_back(parse_subscripts(equation, begin, comma));
    if (comma == lhs_end) break;
    begin = comma + 1;
  }
  EMBER_CHECK(terms.size() == operands.size(), "[einsum] equation '", equation, "' has subscripts for ",
              terms.size(), " operand(s) but ", operands.size(), " were given");

  // Each ellipsis covers the dims its operand has beyond its letters; they align from the right.
  std::vector<int64_t> covered(terms.size(), 0);
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const bool ellipsis = has(terms[i], kEllipsisMark);
    const int64_t letters = static_cast<int64_t>(terms[i].size()) - (ellipsis ? 1 : 0), dims = operands[i].dim();
    EMBER_CHECK(ellipsis ? dims >= letters : dims == letters, "[einsum] operand ", i, " of shape ",
                shape_str(operands[i].shape()), " has ", dims, " dims but its subscripts name ", letters,
                ellipsis ? " and an ellipsis" : "", " (equation '", equation, "')");
    covered[i] = dims - letters;
    ellipsis_dims = std::max(ellipsis_dims, covered[i]);
  }
  EMBER_CHECK(ellipsis_dims <= kMaxEllipsisDims, "[einsum] an ellipsis may cover at most ", kMaxEllipsisDims, " dims");
  Parsed parsed;
  std::vector<Operand>& parts = parsed.parts;
  for (size_t i = 0; i < terms.size(); ++i) parts.push_back({operands[i], expand_ellipsis(terms[i], covered[i], ellipsis_dims)});

  // The output's labels: given after "->", or the ellipsis dims and then the letters used once,
  // in alphabetical order (uppercase first), as PyTorch.
  Labels& output = parsed.output;
  if (arrow != std::string::npos) {
    const Labels subscripts = parse_subscripts(equation, arrow + 2, equation.size());
    output = expand_ellipsis(subscripts, ellipsis_dims, ellipsis_dims);
    for (int label : output) {
      EMBER_CHECK(std::count(output.begin(), output.end(), label) == 1, "[einsum] output subscript ",
                  label_name(label), " appears more than once in equation '", equation, "'");
      EMBER_CHECK(std::any_of(parts.begin(), parts.end(), [&](const Operand& op) { return has(op.labels, label); }),
                  "[einsum] output subscript ", label_name(label), " names no operand's dim in equation '", equation,
                  "'");
    }
  } else {
    for (int64_t t = 0; t < ellipsis_dims; ++t) output.push_back(kLetters + static_cast<int>(t));
    for (int label = 0; label < kLetters; ++label) {
      int64_t uses = 0;
      for (const Operand& op : parts) uses += std::count(op.labels.begin(), op.labels.end(), label);
      if (uses == 1) output.push_back(label);
    }
  }
  return parsed;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  EMBER_CHECK(!operands.empty(), "[einsum] needs at least one operand (equation '", equation, "')");
  if (autocast::OpCast cast{"einsum", operands.front()}) {
    std::vector<Tensor> cast_operands;
    for (const Tensor& t : operands) cast_operands.push_back(cast(t));
    return einsum(equation, cast_operands);
  }
  for (const Tensor& t : operands) {
    ops::check_defined(t, "einsum", "operand");
    ops::check_floating(t, "einsum");
    ops::check_same_device(operands[0], t, "einsum");
  }
  auto [parts, output] = parse(equation, operands);
  const std::vector<int64_t> size_of = label_sizes(parts, equation);
  check_can_allocate(output, size_of, operands[0], "an output", equation);
  for (Operand& op : parts) {
    take_diagonals(op);
    Shape broadcast;
    for (int label : op.labels) broadcast.push_back(size_of[static_cast<size_t>(label)]);
    if (broadcast != op.t.shape()) op.t = op.t.expand(broadcast);
  }

  Operand result = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    Labels needed_later = output;
    for (size_t j = i + 1; j < parts.size(); ++j) needed_later = joined(needed_later, parts[j].labels);
    result = contract(result, parts[i], needed_later, size_of, equation);
  }
  sum_unneeded(result, output);
  Shape perm;
  for (int label : output) perm.push_back(std::find(result.labels.begin(), result.labels.end(), label) - result.labels.begin());
  return perm.empty() ? result.t : result.t.permute(perm);
}

}  // namespace ember
