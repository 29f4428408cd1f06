// pad: widens the trailing dims of a tensor, or crops them where an amount is negative. Every
// mode is made of differentiable ops, so the gradient and every device come for free:
//   constant                       narrow for a crop, cat with blocks of `value` for a pad;
//   reflect, replicate, circular   index_select along the dim, with the source position of each
//                                  output element (a position used twice adds both gradients).
#include <algorithm>
#include <vector>

#include "core/autocast.h"
#include "core/ops.h"
#include "core/ops/helpers.h"

namespace ember {

namespace {

const char* mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::Constant: return "constant";
    case PadMode::Reflect: return "reflect";
    case PadMode::Replicate: return "replicate";
    case PadMode::Circular: return "circular";
  }
  return "?";
}

// What one dim's (before, after) amounts are checked against: the names for the error messages.
struct DimPads {
  int64_t dim, size, before, after;
  PadMode mode;
  const Shape& input_shape;
};

[[noreturn]] void fail(const DimPads& p, const char* why) {
  EMBER_FAIL("[pad] ", mode_name(p.mode), " padding (", p.before, ", ", p.after, ") of dim ", p.dim, " (size ",
             p.size, ") ", why, " (input shape ", shape_str(p.input_shape), ")");
}

Tensor pad_constant(const Tensor& x, const DimPads& p, double value) {
  const int64_t crop_before = std::max<int64_t>(-p.before, 0), crop_after = std::max<int64_t>(-p.after, 0);
  Tensor kept = x.narrow(p.dim, crop_before, p.size - crop_before - crop_after);
  auto block = [&](int64_t length) {
    Shape shape = kept.shape();
    shape[static_cast<size_t>(p.dim)] = length;
    return full(shape, value, TensorOptions(x.dtype()).with_device(x.device()));
  };
  std::vector<Tensor> pieces;
  if (p.before > 0) pieces.push_back(block(p.before));
  pieces.push_back(kept);
  if (p.after > 0) pieces.push_back(block(p.after));
  return pieces.size() == 1 ? kept : cat(pieces, p.dim);
}

// The position in the input that output element j of the dim copies. Reflect and replicate
// measure from the input's edges, so a negative amount only shortens the output; circular wraps
// around what is left after cropping (as PyTorch does where its 1.13 accepts a negative amount).
std::vector<int64_t> source_positions(const DimPads& p) {
  const int64_t n = p.size, length = n + p.before + p.after;
  std::vector<int64_t> source(static_cast<size_t>(length));
  const int64_t lo = std::max<int64_t>(-p.before, 0);
  const int64_t kept = n - lo - std::max<int64_t>(-p.after, 0), wrap_before = std::max<int64_t>(p.before, 0);
  for (int64_t j = 0; j < length; ++j) {
    const int64_t i = j - p.before;  // the position in the input's coordinates
    int64_t s = 0;
    switch (p.mode) {
      case PadMode::Reflect: s = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; break;
      case PadMode::Replicate: s = std::clamp<int64_t>(i, 0, n - 1); break;
      case PadMode::Circular: s = lo + ((j - wrap_before) % kept + kept) % kept; break;
      case PadMode::Constant: break;  // pad_constant's business
    }
    source[static_cast<size_t>(j)] = s;
  }
  return source;
}

void check_pads(const DimPads& p) {
  // Checked first so that the arithmetic below cannot overflow (Note [Checked size arithmetic]):
  // a crop is at most the dim's size, and the padded size fits.
  if (p.before < -p.size || p.after < -p.size) fail(p, "would leave a negative size");
  const std::optional<int64_t> grown = try_add(p.before, p.after);
  const std::optional<int64_t> length = grown ? try_add(p.size, *grown) : std::nullopt;
  if (!length) fail(p, "gives a size that does not fit in int64");
  if (*length < 0) fail(p, "would leave a negative size");
  Shape out_shape = p.input_shape;
  out_shape[static_cast<size_t>(p.dim)] = *length;
  if (!try_numel(out_shape)) fail(p, "gives an output shape whose size does not fit in int64");
  if (p.mode == PadMode::Reflect && (p.before >= p.size || p.after >= p.size))
    fail(p, "must be smaller than the size of the dim");
  if (p.mode == PadMode::Replicate && p.size == 0 && (p.before > 0 || p.after > 0))
    fail(p, "has no element to repeat");
  if (p.mode == PadMode::Circular) {
    const int64_t kept = p.size - std::max<int64_t>(-p.before, 0) - std::max<int64_t>(-p.after, 0);
    if (p.before > kept || p.after > kept) fail(p, "wraps around more than once");
  }
}

}  // namespace

Tensor pad(const Tensor& x, const Shape& pads, PadMode mode, double value) {
  check_enum(mode, PadMode::Circular, "pad", "mode");
  if (mode == PadMode::Reflect || mode == PadMode::Replicate) {
    if (autocast::OpCast cast{mode == PadMode::Reflect ? "reflection_pad" : "replication_pad", x})
      return pad(cast(x), pads, mode, value);
  }
  ops::check_defined(x, "pad");
  ops::check_fill_value(value, x.dtype(), x.shape(), "pad");
  EMBER_CHECK(pads.size() % 2 == 0, "[pad] pads ", shape_str(pads),
              " must come in (before, after) pairs, last dim first, but has ", pads.size(), " values");
  const int64_t pairs = static_cast<int64_t>(pads.size()) / 2;
  EMBER_CHECK(pairs <= x.dim(), "[pad] pads ", shape_str(pads), " name ", pairs, " dims but the input of shape ",
              shape_str(x.shape()), " has ", x.dim());
  EMBER_CHECK(mode == PadMode::Constant || value == 0.0, "[pad] value ", value, " is only used by constant mode, got ",
              mode_name(mode), " mode");
  Tensor out = x;
  for (int64_t pair = 0; pair < pairs; ++pair) {
    const int64_t d = x.dim() - 1 - pair;
    const DimPads p{d, x.size(d), pads[static_cast<size_t>(2 * pair)], pads[static_cast<size_t>(2 * pair + 1)], mode,
                    x.shape()};
    check_pads(p);
    if (p.before == 0 && p.after == 0) continue;
    if (mode == PadMode::Constant) {
      out = pad_constant(out, p, value);
    } else {
      const std::vector<int64_t> source = source_positions(p);
      out = index_select(out, d, from_vector(source, {static_cast<int64_t>(source.size())},
                                              TensorOptions(kInt64).with_device(x.device())));
    }
  }
  return out;
}

}  // namespace ember
