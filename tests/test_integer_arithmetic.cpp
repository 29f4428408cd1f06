// Integer tensors compute exactly, in their own type, and wrap on overflow as PyTorch's do (Note
// [Integer arithmetic] in core/kernel_bodies/elementwise_math.h): the hand-written cases at the
// edges of int64 and uint8, the in-place rules (Note [In-place arithmetic keeps the dtype] in
// core/ops/copy.cpp), and a property test over every integer-capable row of the op table against
// an exact reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "core/ops.h"
#include "tests/op_table.h"
#include "tests/test_helpers.h"

using namespace ember;
using testutil::expect_error;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kTwo53 = int64_t{1} << 53;

Tensor ints(const std::vector<int64_t>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}, kInt64); }
Tensor bytes(const std::vector<int64_t>& v) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, kInt64).to(kUInt8);
}
std::vector<int64_t> as_ints(const Tensor& t) { return t.to(kInt64).to_vector<int64_t>(); }

// int64 arithmetic modulo 2^64, the reference's (no signed overflow).
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }
// a^e modulo 2^64 by binary exponentiation in uint64 (the ring's own arithmetic); a negative
// exponent gives what the real power truncates to, as PyTorch's integer pow.
int64_t wrap_pow(int64_t a, int64_t e) {
  if (e < 0) return a == 1 ? 1 : a == -1 ? ((e % 2) ? -1 : 1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(a);
  for (auto k = static_cast<uint64_t>(e); k; k >>= 1, b *= b)
    if (k & 1) r *= b;
  return static_cast<int64_t>(r);
}

TEST(IntegerArithmetic, Int64PastTwoTo53IsExact) {
  const Tensor a = ints({kMax, kTwo53 + 1, kMin}), b = ints({kMax - 1, kTwo53, kMin + 1});
  EXPECT_EQ(as_ints(eq(a, b)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(as_ints(gt(a, b)), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(as_ints(a - b), (std::vector<int64_t>{1, 1, -1}));
  EXPECT_EQ(as_ints(maximum(a, b)), (std::vector<int64_t>{kMax, kTwo53 + 1, kMin + 1}));
  EXPECT_EQ(as_ints(a * ints({1, 3, 1})), (std::vector<int64_t>{kMax, 3 * (kTwo53 + 1), kMin}));
  EXPECT_EQ(max(ints({kTwo53, kTwo53 + 1, kTwo53 - 1})).item<int64_t>(), kTwo53 + 1);
  EXPECT_EQ(argmax(ints({kTwo53, kTwo53 + 1, kTwo53 - 1}), 0).item<int64_t>(), 1);
}

TEST(IntegerArithmetic, OverflowWrapsAsPyTorch) {
  EXPECT_EQ(as_ints(ints({kMax, kMin}) + ints({1, -1})), (std::vector<int64_t>{kMin, kMax}));
  EXPECT_EQ(as_ints(ints({kMax}) * ints({2})), (std::vector<int64_t>{-2}));
  EXPECT_EQ(as_ints(neg(ints({kMin}))), (std::vector<int64_t>{kMin}));
  EXPECT_EQ(as_ints(pow(ints({2, 3, -1, 5}), ints({64, 2, -3, -1}))), (std::vector<int64_t>{0, 9, -1, 0}));
  EXPECT_EQ(sum(ints({kMax, kMax, 2})).item<int64_t>(), 0);  // wraps, not undefined behaviour
  EXPECT_EQ(as_ints(bytes({255, 0}) + bytes({1, 0})), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(as_ints(bytes({3}) - bytes({5})), (std::vector<int64_t>{254}));
  EXPECT_EQ(as_ints(neg(bytes({3}))), (std::vector<int64_t>{253}));
  EXPECT_EQ(as_ints(bytes({16}) * bytes({17})), (std::vector<int64_t>{16}));  // 272 mod 256
  EXPECT_EQ(as_ints(sign(ints({kMin, 0, kMax}))), (std::vector<int64_t>{-1, 0, 1}));
}

// Note [In-place arithmetic keeps the dtype] in core/ops/copy.cpp
TEST(IntegerArithmetic, InPlaceOpsKeepTheIntegerDtypeOrRefuse) {
  const Tensor x = ints({10, 20});
  x.add_(ints({1, 2}), 2.0);
  EXPECT_EQ(as_ints(x), (std::vector<int64_t>{12, 24}));
  x.sub_(ints({1, 2}), 3.0);
  EXPECT_EQ(as_ints(x), (std::vector<int64_t>{9, 18}));
  x.add_(ints({kMax, 0}));
  EXPECT_EQ(as_ints(x), (std::vector<int64_t>{wrap_add(9, kMax), 18}));
  x.mul_(-1.0);
  EXPECT_EQ(as_ints(x)[1], -18);
  const Tensor y = ints({kTwo53 + 1});
  y.add_(ints({1}), static_cast<double>(kTwo53));
  EXPECT_EQ(as_ints(y), (std::vector<int64_t>{2 * kTwo53 + 1}));  // alpha * other exact in int64
  expect_error([&] { x.add_(ints({1, 2}), 2.5); },
               "[add_] alpha = 2.5 is not an integer, and an integer tensor (int64 of shape [2]) can only be scaled by "
               "an integer in place");
  expect_error([&] { x.sub_(ints({1, 2}), std::nan("")); }, "[sub_] alpha = ");
  expect_error([&] { x.add_(from_vector(std::vector<double>{1.5, 2.0}, {2})); },
               "[add_] the result with a float32 operand of shape [2] is floating and cannot be written into the "
               "int64 tensor of shape [2]");
  expect_error([&] { x.mul_(ones({2})); }, "[mul_] the result with a float32 operand");
  expect_error([&] { x.mul_(0.5); }, "[mul_] the factor = 0.5 is not an integer");
  const Tensor b = bytes({250});
  b.add_(bytes({10}));
  EXPECT_EQ(as_ints(b), (std::vector<int64_t>{4}));
  b.add_(ints({kMax}));  // an int64 operand converts to uint8 (wraps), as a copy would
  EXPECT_EQ(as_ints(b), (std::vector<int64_t>{3}));
  // A floating tensor takes any operand and alpha.
  const Tensor f = ones({2});
  f.add_(ints({1, 2}), 0.5);
  EXPECT_EQ(testutil::values(f), (std::vector<double>{1.5, 2.0}));
}

// --- the property test over the op table ---

// The values every integer input cycles through: the edges of int64 and of the float64 integers,
// of int32 and of uint8, and small ones.
const std::vector<int64_t> kInt64Values = {0, 1, -1, 2, -2, 3, -7, 255, 256, (int64_t{1} << 31) - 1,
                                           int64_t{1} << 31, -(int64_t{1} << 31), kTwo53 - 1, kTwo53, kTwo53 + 1,
                                           -(kTwo53 + 1), kMax, kMax - 1, kMin, kMin + 1};
const std::vector<int64_t> kUInt8Values = {0, 1, 2, 3, 127, 128, 200, 254, 255, 16};

// An input of the row made of those values (floating inputs; indices and masks as the table makes
// them), rotated per input so that equal and different pairs both occur.
std::vector<Tensor> integer_inputs(const testutil::OpRow& r, size_t row, DType dtype) {
  std::vector<Tensor> inputs = testutil::make_op_inputs(r, testutil::op_table_seed(row));
  const std::vector<int64_t>& pool = dtype == kInt64 ? kInt64Values : kUInt8Values;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (r.inputs[k].kind != testutil::OpInput::Kind::Floating) continue;
    std::vector<int64_t> v(static_cast<size_t>(inputs[k].numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = pool[(i * (2 * k + 1) + 5 * k) % pool.size()];
    inputs[k] = from_vector(v, inputs[k].shape(), kInt64).to(dtype);
  }
  return inputs;
}

// A reference of one element, from the row's integer inputs at that element (broadcast), in int64
// modulo 2^64; the result is then taken modulo 2^8 for uint8 rows.
using Elementwise = std::function<int64_t(const std::vector<int64_t>&)>;

int64_t clamp_to(int64_t x, int64_t lo, int64_t hi) { return std::min(std::max(x, lo), hi); }

const std::map<std::string, Elementwise>& elementwise_references() {
  using V = std::vector<int64_t>;
  static const std::map<std::string, Elementwise> refs = {
      {"add", [](const V& x) { return wrap_add(x[0], x[1]); }},
      {"sub", [](const V& x) { return wrap_sub(x[0], x[1]); }},
      {"sub (both broadcast)", [](const V& x) { return wrap_sub(x[0], x[1]); }},
      {"mul", [](const V& x) { return wrap_mul(x[0], x[1]); }},
      {"mul (broadcast)", [](const V& x) { return wrap_mul(x[0], x[1]); }},
      {"pow", [](const V& x) { return wrap_pow(x[0], x[1]); }},
      {"maximum", [](const V& x) { return std::max(x[0], x[1]); }},
      {"minimum", [](const V& x) { return std::min(x[0], x[1]); }},
      {"neg", [](const V& x) { return wrap_sub(0, x[0]); }},
      {"sign", [](const V& x) { return int64_t{(x[0] > 0) - (x[0] < 0)}; }},
      {"clamp", [](const V& x) { return clamp_to(x[0], -1, 1); }},
      {"clamp (tensor bounds)", [](const V& x) { return std::min(std::max(x[0], x[1]), x[2]); }},
      {"clamp (tensor min)", [](const V& x) { return std::max(x[0], x[1]); }},
      {"clamp (tensor max, 0-d)", [](const V& x) { return std::min(x[0], x[1]); }},
      {"where", [](const V& x) { return x[0] ? x[1] : x[2]; }},
      {"masked_fill", [](const V& x) { return x[1] ? int64_t{-3} : x[0]; }},
      {"eq", [](const V& x) { return int64_t{x[0] == (x[2] ? x[0] : x[1])}; }},
      {"ne", [](const V& x) { return int64_t{x[0] != (x[2] ? x[0] : x[1])}; }},
      {"lt", [](const V& x) { return int64_t{x[0] < (x[2] ? x[0] : x[1])}; }},
      {"le", [](const V& x) { return int64_t{x[0] <= (x[2] ? x[0] : x[1])}; }},
      {"gt", [](const V& x) { return int64_t{x[0] > (x[2] ? x[0] : x[1])}; }},
      {"ge", [](const V& x) { return int64_t{x[0] >= (x[2] ? x[0] : x[1])}; }},
  };
  return refs;
}

// The inputs broadcast to `shape` and read as int64 (uint8 widens exactly).
std::vector<std::vector<int64_t>> broadcast_values(const std::vector<Tensor>& inputs, const Shape& shape) {
  std::vector<std::vector<int64_t>> out;
  for (const Tensor& t : inputs) out.push_back(t.to(kInt64).expand(shape).contiguous().to_vector<int64_t>());
  return out;
}

int64_t in_dtype(int64_t v, DType dtype) { return dtype == kUInt8 ? (v & 0xFF) : v; }

// Reductions along `dim` of a row-major [outer, n, inner] view: each output element from the n
// values it reduces.
using Reduce = std::function<int64_t(const std::vector<int64_t>&)>;
std::vector<int64_t> reduce_along(const std::vector<int64_t>& x, const Shape& shape, const std::vector<int64_t>& dims,
                                  const Reduce& f) {
  // Output index: the input index with the reduced dims dropped; gather each group's values.
  std::map<std::vector<int64_t>, std::vector<int64_t>> groups;
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t flat = 0; flat < x.size(); ++flat) {
    std::vector<int64_t> key;
    for (size_t d = 0; d < shape.size(); ++d)
      if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) key.push_back(index[d]);
    groups[key].push_back(x[flat]);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  std::vector<int64_t> out;
  for (const auto& [key, values] : groups) out.push_back(f(values));
  return out;
}

int64_t wrapping_sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}, wrap_add); }
int64_t first_argmax(const std::vector<int64_t>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

// The reductions and orderings of the table's integer rows, from the input's int64 values
// (an integer sum or cumsum is int64, as PyTorch's, so it wraps modulo 2^64).
std::optional<std::vector<int64_t>> reduction_reference(const std::string& label, const std::vector<int64_t>& x,
                                                        const Shape& shape) {
  const auto mx = [](const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); };
  const auto mn = [](const std::vector<int64_t>& v) { return *std::min_element(v.begin(), v.end()); };
  if (label == "sum") return std::vector<int64_t>{wrapping_sum(x)};
  if (label == "sum (dims, keepdim)" || label == "sum (dims)" || label == "sum_to")
    return reduce_along(x, shape, {0, 2}, wrapping_sum);
  if (label == "max") return std::vector<int64_t>{mx(x)};
  if (label == "max (dims)") return reduce_along(x, shape, {1}, mx);
  if (label == "min") return std::vector<int64_t>{mn(x)};
  if (label == "min (dims)") return reduce_along(x, shape, {0}, mn);
  if (label == "argmax") return reduce_along(x, shape, {1}, first_argmax);
  if (label == "split (an unused piece)") {  // sum(rows 0-1) * sum(rows 3-4) of [5, 3]
    const auto rows = static_cast<std::ptrdiff_t>(2 * shape[1]);
    return std::vector<int64_t>{wrap_mul(wrapping_sum(std::vector<int64_t>(x.begin(), x.begin() + rows)),
                                         wrapping_sum(std::vector<int64_t>(x.end() - rows, x.end())))};
  }
  if (label == "cumsum") {
    std::vector<int64_t> out(x.size());
    const int64_t n = shape[1];
    for (size_t i = 0; i < x.size(); ++i)
      out[i] = (static_cast<int64_t>(i) % n == 0) ? x[i] : wrap_add(out[i - 1], x[i]);
    return out;
  }
  auto sorted_rows = [&](bool descending, int64_t keep) {
    std::vector<int64_t> out;
    const int64_t n = shape[1];
    for (int64_t r = 0; r < shape[0]; ++r) {
      std::vector<int64_t> row(x.begin() + r * n, x.begin() + (r + 1) * n);
      std::sort(row.begin(), row.end());
      if (descending) std::reverse(row.begin(), row.end());
      out.insert(out.end(), row.begin(), row.begin() + keep);
    }
    return out;
  };
  if (label == "sort") return sorted_rows(false, shape[1]);
  if (label == "topk") return sorted_rows(true, 2);
  return std::nullopt;
}

// Rows whose integer output only moves input elements (a copy, a view, a gather): checked by
// running the row on labels (1, 2, ... across all integer inputs, exact in any dtype) and
// reading each output element's label back as the input value it must be (0: a value the op
// fills itself, which is 0 for these rows).
void expect_moves_elements(const testutil::OpRow& r, const std::vector<Tensor>& inputs, const Tensor& out) {
  std::vector<Tensor> labels = inputs;
  std::vector<int64_t> value_of{0};
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (r.inputs[k].kind != testutil::OpInput::Kind::Floating) continue;
    const std::vector<int64_t> v = inputs[k].to(kInt64).contiguous().to_vector<int64_t>();
    std::vector<int64_t> l(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      l[i] = static_cast<int64_t>(value_of.size());
      value_of.push_back(v[i]);
    }
    labels[k] = from_vector(l, inputs[k].shape(), kInt64);
  }
  const std::vector<int64_t> moved = r.fn(labels).contiguous().to_vector<int64_t>();
  const std::vector<int64_t> got = out.to(kInt64).contiguous().to_vector<int64_t>();
  ASSERT_EQ(moved.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(moved[i] >= 0 && moved[i] < static_cast<int64_t>(value_of.size()))
        << "element " << i << " is not a moved input element (label " << moved[i] << ")";
    ASSERT_EQ(got[i], value_of[static_cast<size_t>(moved[i])]) << "element " << i;
  }
}

TEST(IntegerArithmetic, EveryIntegerRowOfTheOpTableIsExact) {
  const auto& table = testutil::op_table();
  int checked = 0;
  for (size_t row = 0; row < table.size(); ++row) {
    const testutil::OpRow& r = table[row];
    if (r.floating_only) continue;
    for (DType dtype : {kInt64, kUInt8}) {
      const std::string label = testutil::op_label(r);
      SCOPED_TRACE(label + " in " + dtype_name(dtype));
      const std::vector<Tensor> inputs = integer_inputs(r, row, dtype);
      Tensor out;
      try {
        out = r.fn(inputs);
      } catch (const Error& e) {
        // Only a value the dtype cannot hold may be refused (masked_fill's -3 in uint8).
        EXPECT_NE(std::string(e.what()).find("cannot be converted to " + std::string(dtype_name(dtype))),
                  std::string::npos)
            << e.what();
        continue;
      }
      ++checked;
      if (r.op == "to") {
        // A cast to float64 converts each integer exactly (not through float32).
        const std::vector<int64_t> ints = inputs[0].to_vector<int64_t>();
        const std::vector<double> got = out.to_vector<double>();
        ASSERT_EQ(got.size(), ints.size());
        for (size_t i = 0; i < ints.size(); ++i) EXPECT_EQ(got[i], static_cast<double>(ints[i])) << "element " << i;
        continue;
      }
      if (is_floating(out.dtype())) {
        // An op that leaves the integers (true division, a fractional scalar, mean) computes as
        // it does on the inputs converted to float32 first, as PyTorch.
        std::vector<Tensor> as_float = inputs;
        for (size_t k = 0; k < inputs.size(); ++k)
          if (r.inputs[k].kind == testutil::OpInput::Kind::Floating) as_float[k] = inputs[k].to(kFloat32);
        EXPECT_TRUE(testutil::bitwise_equal(out, r.fn(as_float)));
        continue;
      }
      const auto& refs = elementwise_references();
      if (const auto it = refs.find(label); it != refs.end()) {
        const std::vector<std::vector<int64_t>> x = broadcast_values(inputs, out.shape());
        const std::vector<int64_t> got = out.to(kInt64).contiguous().to_vector<int64_t>();
        const DType result = out.dtype();
        for (size_t i = 0; i < got.size(); ++i) {
          std::vector<int64_t> at;
          for (const auto& v : x) at.push_back(v[i]);
          ASSERT_EQ(got[i], in_dtype(it->second(at), result)) << "element " << i;
        }
        continue;
      }
      const std::vector<int64_t> x = inputs[0].to(kInt64).contiguous().to_vector<int64_t>();
      if (auto want = reduction_reference(label, x, inputs[0].shape())) {
        for (int64_t& v : *want) v = in_dtype(v, out.dtype());
        EXPECT_EQ(out.to(kInt64).contiguous().to_vector<int64_t>(), *want);
        continue;
      }
      if (label.starts_with("sort (") || label == "argsort") {  // indices: they order the values
        const int64_t dim = label == "argsort" ? 1 : 0;
        const Tensor ordered = gather(inputs[0], dim, out).to(kInt64);
        const Tensor next = ordered.narrow(dim, 1, ordered.size(dim) - 1);
        const Tensor before = ordered.narrow(dim, 0, ordered.size(dim) - 1);
        EXPECT_EQ(sum(label == "argsort" ? lt(next, before) : gt(next, before)).item<int64_t>(), 0);
        continue;
      }
      expect_moves_elements(r, inputs, out);
    }
  }
  EXPECT_GE(checked, 80);
}

}  // namespace
