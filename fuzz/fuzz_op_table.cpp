// libFuzzer target: every row of the op table (tests/op_table.h) on inputs the bytes decide.
// An input picks a row and a dtype, then, per input of the row, a shape (the row's, one dim
// zero-sized, a broadcast view, a strided view of a larger tensor, an overlapping view with a
// zero stride, or any small shape) and values (the row's domain, or extremes: +-0, +-1, huge,
// denormal, NaN, +-inf, the 16-bit maxima), indices in or out of range, masks of 0, 1 or 2; it
// runs the row forward and, where it can, backward. The op must give a result or an
// ember::Error; anything else escaping, or a sanitizer report, is a finding. An input can also
// ask for the row's float64 comparison (the op table's own check, on the row's domain): a result
// outside the row's tolerance is a finding too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/generator.h"
#include "core/ops.h"
#include "tests/op_table.h"

namespace {

using namespace ember;

// Reads the fuzzer's bytes one decision at a time; past the end every decision is 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t pick(size_t n) { return n == 0 ? 0 : next() % n; }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

// What the current input runs, for a finding's report.
std::string current;

// A failed gtest assertion inside the op table's float64 comparison (a result outside the row's
// tolerance) stops the fuzzer as a finding.
class TrapOnFailure : public testing::EmptyTestEventListener {
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "fuzz_op_table: %s: %s\n", current.c_str(), result.message());
      __builtin_trap();
    }
  }
};

const std::vector<double> kExtremes = {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.0, 1e30, -1e30, 1e-45, 65504.0, 70000.0,
                                       3.0e38, std::numeric_limits<double>::quiet_NaN(),
                                       std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity()};

constexpr DType kDTypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kUInt8};

// The shape of one input: the row's, or one of the hostile variants, as a tensor to fill.
struct Layout {
  Shape shape;       // what the op sees
  Shape allocated;   // what is allocated and filled, before the view
  int view = 0;      // 0: none; 1: expand a size-1 dim; 2: every other element of the last dim; 3: zero stride
};

Layout choose_layout(Bytes& in, const Shape& row_shape) {
  Layout l{row_shape, row_shape, 0};
  switch (in.pick(8)) {
    case 0:
    case 1:
    case 2: break;  // the row's own shape, most often
    case 3:         // one dim zero-sized
      if (!l.shape.empty()) l.shape[in.pick(l.shape.size())] = 0;
      l.allocated = l.shape;
      break;
    case 4:  // a broadcast view: one dim of size 1 expanded
      if (!l.shape.empty()) {
        l.allocated[in.pick(l.shape.size())] = 1;
        l.view = 1;
      }
      break;
    case 5:  // a strided view: every other element of a last dim twice as long
      if (!l.shape.empty()) {
        l.allocated.back() = 2 * l.shape.back();
        l.view = 2;
      }
      break;
    case 6:  // an overlapping view: all elements of the last dim are one element
      if (!l.shape.empty()) {
        l.allocated.back() = 1;
        l.view = 3;
      }
      break;
    default: {  // any small shape
      Shape s(in.pick(5));
      for (int64_t& d : s) d = static_cast<int64_t>(in.pick(6));
      l.shape = l.allocated = s;
    }
  }
  return l;
}

Tensor apply_view(const Tensor& t, const Layout& l) {
  switch (l.view) {
    case 1: return t.expand(l.shape);
    case 2: return t.slice(-1, 0, l.allocated.back(), 2);
    case 3: return t.expand(l.shape);
    default: return t;
  }
}

Tensor make_input(Bytes& in, const testutil::OpInput& spec, DType dtype, bool differentiable) {
  const Layout l = choose_layout(in, spec.shape);
  const int64_t n = std::max<int64_t>(1, try_numel(l.allocated).value_or(1));
  std::vector<double> v(static_cast<size_t>(std::min<int64_t>(n, 4096)));
  switch (spec.kind) {
    case testutil::OpInput::Kind::Index: {
      const bool hostile = in.pick(4) == 0;
      for (double& x : v)
        x = hostile ? std::vector<double>{-1.0, static_cast<double>(spec.high), 1e12, 0.0}[in.pick(4)]
                    : static_cast<double>(in.pick(static_cast<size_t>(std::max<int64_t>(spec.high, 1))));
      return apply_view(from_vector(v, l.allocated, kInt64), l);
    }
    case testutil::OpInput::Kind::Mask:
      for (double& x : v) x = static_cast<double>(in.pick(in.pick(8) == 0 ? 3 : 2));
      return apply_view(from_vector(v, l.allocated, kFloat64).to(kUInt8), l);
    case testutil::OpInput::Kind::Floating: break;
  }
  const bool extremes = in.pick(3) == 0;
  for (double& x : v)
    x = extremes && in.pick(2) == 0 ? kExtremes[in.pick(kExtremes.size())]
                                    : spec.lo + (spec.hi - spec.lo) * static_cast<double>(in.next()) / 256.0;
  // An integer input takes the values' integer parts (NaN as 0, the infinities as int64's ends):
  // what a cast gives, the extremes of int64 included.
  if (!is_floating(dtype))
    for (double& x : v) x = std::isnan(x) ? 0.0 : std::clamp(std::trunc(x), -0x1p63, 0x1p63 - 1024.0);
  Tensor t = apply_view(from_vector(v, l.allocated, kFloat64).to(dtype), l);
  if (differentiable && is_floating(dtype) && !spec.constant) t = t.detach().requires_grad_();
  return t;
}

void run_hostile(Bytes& in, const testutil::OpRow& r) {
  const DType dtype = kDTypes[in.pick(std::size(kDTypes))];
  std::vector<Tensor> inputs;
  for (const testutil::OpInput& spec : r.inputs) inputs.push_back(make_input(in, spec, dtype, r.differentiable));
  Tensor out = r.fn(inputs);
  if (!out.defined() || !out.requires_grad()) return;
  sum(out.to(kFloat64)).backward();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  testing::InitGoogleTest(argc, *argv);
  testing::UnitTest::GetInstance()->listeners().Append(new TrapOnFailure);  // gtest owns it
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const auto& table = testutil::op_table();
  const size_t row = in.pick(table.size());
  const testutil::OpRow& r = table[row];
  try {
    if (in.pick(4) == 0) {  // the row's float64 comparison, on its own domain, from a fuzzed seed
      const DType dtype = kDTypes[in.pick(4)];
      const uint64_t seed = testutil::op_table_seed(row) + in.next();
      current = testutil::op_label(r) + " in " + dtype_name(dtype) + ", seed " + std::to_string(seed);
      testutil::compare_with_float64(r, seed, dtype, kCPU, testutil::column_tolerance(r, dtype));
    } else {
      run_hostile(in, r);
    }
  } catch (const Error&) {
  }
  return 0;
}
