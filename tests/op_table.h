#pragma once
// Note [The op table]
// One row per op of the registry (or several, one per shape class or variant): how to make its
// inputs, how to call it, and what it promises. tests/test_op_table.cpp runs every row through
// the same checks, so a new op gets them all from one row:
//   - gradcheck in float64 (rows that are differentiable),
//   - each further dtype column against float64 computed from the column's own values (the
//     inputs and the upstream gradient rounded to the column's dtype): the forward and the
//     gradients within the column's tolerance; the columns are float32, bfloat16 and float16,
//   - CUDA against the CPU in every column (skipped without a GPU),
//   - the output dtype under CPU and CUDA autocast against PyTorch's (autocast_fixture below),
//   - a composed-ops reference where a row has one: forward and gradients in float64,
//   - non-contiguous inputs against contiguous ones, and zero-size inputs (a result or a clean error),
//   - the error for integer inputs, naming the op, for ops that compute only in floating point,
//   - completeness: every op of the registry (Note [The op registry] in core/op_registry.h) has a
//     row or an exemption with its reason.
// The hand-written tests of each family stay where they are (values at known points, PyTorch
// parity fixtures, the op's own bad-argument errors); the table adds what is the same for all.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::testutil {

// How one input of a row is made. Floating inputs take the dtype under test; the others keep
// their own.
struct OpInput {
  enum class Kind {
    Floating,  // uniform in [lo, hi), differentiable unless `constant`
    Index,     // int64 in [0, high)
    Mask,      // uint8, each element 1 with probability 1/2
  };
  Kind kind = Kind::Floating;
  Shape shape;
  double lo = -2.0, hi = 2.0;
  int64_t high = 0;
  bool constant = false;  // a floating input that is not differentiated (a target, a label)
};

inline OpInput floating(Shape shape, double lo = -2.0, double hi = 2.0) {
  return {OpInput::Kind::Floating, std::move(shape), lo, hi, 0, false};
}
inline OpInput constant(Shape shape, double lo = -2.0, double hi = 2.0) {
  return {OpInput::Kind::Floating, std::move(shape), lo, hi, 0, true};
}
inline OpInput index(Shape shape, int64_t high) { return {OpInput::Kind::Index, std::move(shape), 0, 0, high, true}; }
inline OpInput mask(Shape shape) { return {OpInput::Kind::Mask, std::move(shape), 0, 0, 0, true}; }

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct OpRow {
  std::string op;       // its name in the registry (core/op_registry.h)
  std::string variant;  // what this row exercises, when an op has several rows
  std::vector<OpInput> inputs;
  OpFn fn;
  bool differentiable = true;
  // Integer floating-kind inputs are refused with "[<op>] ..." (false: the op computes on
  // integers too, like add or cat).
  bool floating_only = true;
  double float32_tolerance = 1e-4;  // relative to 1 + |float64 value|
  // The bfloat16 and float16 columns' tolerance, in steps of the dtype (finfo(dtype).eps), also
  // relative to 1 + |float64 value|.
  double sixteen_bit_steps = 4;
  // The same function composed of other ops (optional): the row's forward and gradients must
  // match it in float64, so a fused kernel is checked against the formula it fuses.
  OpFn reference;
};

const std::vector<OpRow>& op_table();
std::string op_label(const OpRow& r);  // "op (variant)"
uint64_t op_table_seed(size_t row);    // the seed of row `row`'s inputs
// The row's tolerance in a float32, bfloat16 or float16 column.
double column_tolerance(const OpRow& r, DType dtype);

// The row's inputs in float64 (the values every column rounds from), and those inputs converted
// for one column: floating ones to `dtype` (leaves that require grad where differentiated), all
// on `device`.
std::vector<Tensor> make_op_inputs(const OpRow& r, uint64_t seed);
std::vector<Tensor> op_inputs_as(const OpRow& r, const std::vector<Tensor>& base, DType dtype, Device device);

// Runs the row in `dtype` on `device` and in float64 on the CPU from the same values, and expects
// the outputs and the gradients of sum(out * upstream) (one random float64 upstream for both)
// within tol * (1 + |float64 value|).
void compare_with_float64(const OpRow& r, uint64_t seed, DType dtype, Device device, double tol);
// The row against its reference, both in float64 on the CPU, within `tol`.
void compare_with_reference(const OpRow& r, uint64_t seed, double tol);

// The row on non-contiguous copies of its inputs (each read with a stride of 2 along its last
// dim, leaves where they are differentiated) against the row on the contiguous inputs, both in
// float64 on `device`: the same outputs and gradients within 1e-12.
void compare_non_contiguous(const OpRow& r, uint64_t seed, Device device);

// The row with zero-size inputs: each input whose leading dim is the first input's gets 0 there
// (the batch the inputs share). The op must either compute, and then its backward gives each
// differentiated input a gradient of that input's shape, or refuse with an ember::Error that
// names an op ("[name] ..."); never crash. Returns whether it computed.
bool check_zero_size(const OpRow& r, uint64_t seed, Device device);

// Every row's output dtype under autocast on `device` against PyTorch's, read from
// <file> in fixtures_dir() (tests/fixture.h; written by make_autocast_fixtures.py). The file's three
// columns are the dtypes with the row's floating inputs in columns[k].inputs, inside a region of
// columns[k].region; "error" where PyTorch refuses, which ember must do too.
struct AutocastColumn {
  DType inputs, region;
};
void expect_autocast_dtypes(const std::string& file, Device device, const std::array<AutocastColumn, 3>& columns);

// Registered ops that have no row, each with the reason.
struct OpExemption {
  std::string name, reason;
};
const std::vector<OpExemption>& op_table_exemptions();

}  // namespace ember::testutil
