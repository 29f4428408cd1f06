// Tensor fingerprints on the CPU (Note [Tensor fingerprints]): one read of the data, cut into
// chunks whose sums are added up in any order (they are exact), so the thread count does not
// change a bit.
//
// Note [Fingerprints of strided views]
// The fingerprint weighs each word by its position in the tensor's logical (row-major) order,
// not in memory. Checkpointing fingerprints what ops save, and ops save views: matmul saves a
// Linear's weight as the transposed view weight.t(), and attention's q, k and v as head-split
// views of one projection, with gaps between their rows (Note [Two batch levels] in
// core/ops/matmul.cpp). Copying such a view to row-major first costs more than the fingerprint
// itself: a cache-hostile transpose for weight.t() (bench/RESULTS.md, "The checkpoint value
// check"), and for the GPT with its blocks checkpointed, copies of q, k and v in every step
// (bench/RESULTS.md, "Products through oneDNN", its last part; docs/checkpointing.md).
// So every view is read where it lies, in memory order: its dims sorted from the largest memory
// stride to the smallest (broadcast dims, stride 0, outermost), the innermost one as the row.
// Each row starts at an offset and a logical position computed from the outer indices, and
// along it both grow by fixed steps, so a row is a run of Note [Fingerprints by running sums]
// (a strided row is a gather, still read once).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/cpu/parallel.h"
#include "core/cpu/simd_dispatch.h"
#include "core/kernel_bodies/fingerprint.h"
#include "core/kernels.h"

namespace ember::cpu {
namespace {

// Note [Fingerprints by running sums]
// The weighted sum (Note [Tensor fingerprints]) multiplies every word by its position. Along a
// run of elements whose logical positions are b, b + step, b + 2 step, ... (a contiguous chunk,
// step 1, or a row of a strided view), element j's words w_jk (k < W, W = 1 or 2 words an
// element) sit at positions W (b + j step) + k, so the run's share of the weighted sum is
//     (W b + 1) S + H + W step J,   S = sum of w_jk,  H = sum of k w_jk,  J = sum of j w_jk,
// three sums that do not depend on where the run lies. J needs no multiply either: lane l of
// kRunLanes takes elements l, l + kRunLanes, l + 2 kRunLanes, ... (a vectorisable loop over the
// lanes, as in Note [Lane reductions]) and keeps the running sum P_l of its words and the sum T_l
// of those running sums. After R rounds T_l = sum over r of (R - r) w_(r kRunLanes + l), so
//     J = sum over l of (l + kRunLanes R) P_l - kRunLanes T_l      (modulo 2^64 throughout).
// That is two 64-bit adds a word and no multiply: attention's weights are fingerprinted much
// faster than with a 32 x 32-bit multiply-add a word, about as fast as sum() reads them
// (bench/RESULTS.md, "AVX-512 in ember's loops, fingerprints by running sums").
struct Run {
  uint64_t sum = 0, high = 0, indexed = 0;  // S, H and J of the Note
};

inline constexpr int64_t kRunLanes = 16;

template <class T>
inline constexpr uint64_t kWords = fingerprint::kWordsPerElement<T>;

// Note [Fingerprints of 16-bit tensors]
// A bfloat16 or float16 element is fingerprinted as its float32 value's bits, widened as it is
// read: the bits the kernel table's staging through float32 gives (Note [Sixteen-bit floats
// through float32]; CUDA's kernel is still staged), so a tensor's fingerprint is the same on both
// devices, without the float32 copy of the tensor that staging makes. That copy, twice the
// tensor, was the largest buffer alive at the peak of a checkpointed bfloat16 GPT step, whose
// value check fingerprints the attention probabilities.
template <class T>
using Read = std::conditional_t<is_sixteen_bit_float<T>, float, T>;

// Element j of a run into its S, H and J one by one.
template <class T>
void add_to_run(Run& run, uint64_t j, T value) {
  const auto words = fingerprint::words_of(value);
  for (const uint32_t word : words.w) {
    run.sum += word;
    run.indexed += j * word;
  }
  if constexpr (kWords<T> == 2) run.high += words.w[1];
}

// The sums of the run load(0), ..., load(n - 1) (see the Note). A run shorter than kShortRun
// (attention's q rows are 32 floats) is summed element by element, j * word a 32 x 32-bit
// product: there folding the lanes would cost more than the run.
inline constexpr int64_t kShortRun = 4 * kRunLanes;

template <class T, class Load>
Run run_sums(int64_t n, const Load& load) {
  Run run;
  if (n < kShortRun) {
    for (int64_t j = 0; j < n; ++j) add_to_run(run, static_cast<uint32_t>(j), load(j));
    return run;
  }
  uint64_t running[kRunLanes] = {}, total[kRunLanes] = {}, high[kRunLanes] = {};
  const int64_t rounds = n / kRunLanes;
  for (int64_t r = 0; r < rounds; ++r)
    for (int64_t l = 0; l < kRunLanes; ++l) {
      const auto words = fingerprint::words_of(load(r * kRunLanes + l));
      running[l] += words.w[0];
      if constexpr (kWords<T> == 2) {
        running[l] += words.w[1];
        high[l] += words.w[1];
      }
      total[l] += running[l];
    }
  const auto lanes = static_cast<uint64_t>(kRunLanes), first_after = lanes * static_cast<uint64_t>(rounds);
  for (int64_t l = 0; l < kRunLanes; ++l) {
    run.sum += running[l];
    run.high += high[l];
    run.indexed += (static_cast<uint64_t>(l) + first_after) * running[l] - lanes * total[l];
  }
  for (int64_t j = rounds * kRunLanes; j < n; ++j) add_to_run(run, static_cast<uint64_t>(j), load(j));
  return run;
}

// The fingerprint sums of a run whose elements sit at logical positions b, b + step, ...
template <class T>
fingerprint::Sums sums_of(const Run& run, int64_t b, int64_t step) {
  const uint64_t w = kWords<T>;
  return {run.sum, (w * static_cast<uint64_t>(b) + 1) * run.sum + run.high +
                       w * static_cast<uint64_t>(step) * run.indexed};
}

// The sums over elements [begin, end) of row-major data.
template <class T>
fingerprint::Sums chunk_sums(const T* p, int64_t begin, int64_t end) {
  const T* first = p + begin;
  const Run run =
      simd_dispatch([&] { return run_sums<Read<T>>(end - begin, [first](int64_t j) { return Read<T>(first[j]); }); });
  return sums_of<Read<T>>(run, begin, 1);
}

// A view read in memory order (Note [Fingerprints of strided views]): its dims of size > 1 from
// outermost to innermost, each with its size, its memory stride and its row-major stride.
struct MemoryOrder {
  std::vector<int64_t> sizes, strides, logical_strides;
};

MemoryOrder memory_order(const Tensor& x) {
  const Shape& shape = x.shape();
  const Shape& strides = x.strides();
  Shape logical(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) logical[d - 1] = logical[d] * shape[d];
  std::vector<size_t> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(d);
  const auto outerness = [&](size_t d) { return strides[d] == 0 ? INT64_MAX : strides[d]; };
  std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return outerness(a) > outerness(b); });
  MemoryOrder order;
  for (size_t d : dims) {
    order.sizes.push_back(shape[d]);
    order.strides.push_back(strides[d]);
    order.logical_strides.push_back(logical[d]);
  }
  return order;
}

// The sums over the rows [begin, end) of a view in `order` (a row: the innermost dim in memory),
// each element at its logical position. The rows' outer indices are counted up like an odometer,
// their first row's found by division: attention's q rows are 32 floats, and dividing out every
// row's indices cost more than reading the row.
template <class T>
fingerprint::Sums strided_sums(const T* p, const MemoryOrder& order, int64_t begin, int64_t end) {
  const size_t inner = order.sizes.size() - 1;
  const int64_t length = order.sizes[inner], step = order.logical_strides[inner], stride = order.strides[inner];
  return simd_dispatch([&] {
    std::vector<int64_t> index(inner);  // the row's indices in the outer dims
    int64_t position = 0, offset = 0;   // its first element's logical position and memory offset
    for (int64_t rest = begin, d = static_cast<int64_t>(inner) - 1; d >= 0; --d) {
      const size_t u = static_cast<size_t>(d);
      index[u] = rest % order.sizes[u];
      position += index[u] * order.logical_strides[u];
      offset += index[u] * order.strides[u];
      rest /= order.sizes[u];
    }
    fingerprint::Sums s;
    for (int64_t row = begin; row < end; ++row) {
      const T* data = p + offset;
      const Run run = stride == 1
                          ? run_sums<Read<T>>(length, [data](int64_t j) { return Read<T>(data[j]); })
                          : run_sums<Read<T>>(length, [data, stride](int64_t j) { return Read<T>(data[j * stride]); });
      fingerprint::add(s, sums_of<Read<T>>(run, position, step));
      for (size_t d = inner; d-- > 0;) {  // the next row
        position += order.logical_strides[d];
        offset += order.strides[d];
        if (++index[d] < order.sizes[d]) break;
        position -= order.logical_strides[d] * order.sizes[d];
        offset -= order.strides[d] * order.sizes[d];
        index[d] = 0;
      }
    }
    return s;
  });
}

// Note [Fingerprints of short rows]
// Attention's q, k and v are views whose rows are 32 floats: too short for the lanes of Note
// [Fingerprints by running sums] to pay for their folding, so their rows were summed element by
// element, far below memory speed, and were the largest part of a checkpointed GPT step's value
// check (bench/RESULTS.md, "The value check under a plan"). But those rows lie side by
// side in memory (q's 4 heads of one token make 128 consecutive floats of the projection), and the
// next such stretch is always the same distance further in memory and the same step further in
// logical order (q's next token). So a view whose innermost dim is a short contiguous row is read
// as tiles: the innermost dims that are contiguous in memory, up to kTileElements elements, make
// the tile, whose element l has its own logical offset o_l within it; the next dim outward gives
// the rounds, tile after tile, each step further; any dims outside that are counted through like
// rows. Each element of the tile is a lane that keeps the running sums of the Note over the R
// rounds of a stretch starting at logical position b, so with x_rl the words of element l in round
// r (summed, and k w for H)
//     S_l = P_l,   J_l = sum over r of r x_rl = R P_l - T_l,
// and the stretch's share of the weighted sum is the sum over lanes of
//     (W (b + o_l) + 1) S_l + H_l + W step J_l,
// a multiply per lane and stretch, not per word. The lanes are taken 16 at a time, each group going
// through all the rounds with its sums in registers. The GPT's q (2 MB of a [16, 256, 384]
// projection) now takes little more than a contiguous copy of it (bench/RESULTS.md, "The value
// check under a plan").
inline constexpr int64_t kTileElements = 256;

// A view read as tiles: its dims in `order` are [0, rounds) outer, `rounds` the rounds and
// (rounds, end) the tile's.
struct Tiles {
  size_t rounds;
  std::vector<int64_t> offsets;  // o_l, for the tile's elements in memory order
};

// The tiling of a view in `order`, if its innermost dim is a short contiguous row and some dim
// lies outside the tile to give the rounds.
std::optional<Tiles> tiles_of(const MemoryOrder& order) {
  const size_t dims = order.sizes.size();
  if (dims < 2 || order.strides[dims - 1] != 1 || order.sizes[dims - 1] >= kShortRun) return std::nullopt;
  size_t first = dims - 1;  // the tile's outermost dim
  int64_t elements = order.sizes[first];
  while (first > 1 && order.strides[first - 1] == elements && elements * order.sizes[first - 1] <= kTileElements)
    elements *= order.sizes[--first];
  Tiles tiles{first - 1, std::vector<int64_t>(static_cast<size_t>(elements), 0)};
  for (int64_t l = 0; l < elements; ++l)  // element l's indices in the tile's dims, innermost first
    for (int64_t rest = l, d = static_cast<int64_t>(dims) - 1; d >= static_cast<int64_t>(first); --d) {
      const size_t u = static_cast<size_t>(d);
      tiles.offsets[static_cast<size_t>(l)] += rest % order.sizes[u] * order.logical_strides[u];
      rest /= order.sizes[u];
    }
  return tiles;
}

// The running sums of the first `lanes` elements of `rounds` tiles from `first`, `stride` apart.
// FixedLanes > 0 is `lanes` known at compile time: a loop of one vector; 0 for the last group.
template <int64_t FixedLanes, class T>
void add_rounds(const T* first, int64_t rounds, int64_t stride, int64_t lanes, uint64_t* running, uint64_t* total,
                uint64_t* high) {
  const int64_t n = FixedLanes > 0 ? FixedLanes : lanes;
  for (int64_t r = 0; r < rounds; ++r) {
    const T* tile = first + r * stride;
    for (int64_t l = 0; l < n; ++l) {
      const auto words = fingerprint::words_of(Read<T>(tile[l]));
      running[l] += words.w[0];
      if constexpr (kWords<T> == 2) {
        running[l] += words.w[1];
        high[l] += words.w[1];
      }
      total[l] += running[l];
    }
  }
}

// The sums of `rounds` tiles from `first` (`stride` apart in memory, `step` apart in logical
// order, the first at logical position b), `lanes` <= kRunLanes of their elements (see the Note).
template <class T>
fingerprint::Sums lane_sums(const T* first, int64_t rounds, int64_t stride, int64_t step, int64_t b,
                            const int64_t* offsets, int64_t lanes) {
  uint64_t running[kRunLanes] = {}, total[kRunLanes] = {}, high[kRunLanes] = {};
  if (lanes == kRunLanes) add_rounds<kRunLanes>(first, rounds, stride, lanes, running, total, high);
  else add_rounds<0>(first, rounds, stride, lanes, running, total, high);
  fingerprint::Sums s;
  const uint64_t w = kWords<Read<T>>, n = static_cast<uint64_t>(rounds);
  for (int64_t l = 0; l < lanes; ++l) {
    const uint64_t position = static_cast<uint64_t>(b + offsets[l]);
    s.plain += running[l];
    s.weighted += (w * position + 1) * running[l] + high[l] + w * static_cast<uint64_t>(step) * (n * running[l] - total[l]);
  }
  return s;
}

// The sums over the units [begin, end) of a tiled view, a unit being one round of one outer row.
template <class T>
fingerprint::Sums tiled_sums(const T* p, const MemoryOrder& order, const Tiles& tiles, int64_t begin, int64_t end) {
  const size_t rd = tiles.rounds;
  const int64_t rounds = order.sizes[rd], stride = order.strides[rd], step = order.logical_strides[rd];
  const auto elements = static_cast<int64_t>(tiles.offsets.size());
  return simd_dispatch([&] {
    fingerprint::Sums s;
    for (int64_t unit = begin; unit < end;) {
      const int64_t outer = unit / rounds, r = unit % rounds, n = std::min(rounds - r, end - unit);
      int64_t position = r * step, offset = r * stride;  // of the first tile, from the outer indices
      for (int64_t rest = outer, d = static_cast<int64_t>(rd) - 1; d >= 0; --d) {
        const size_t u = static_cast<size_t>(d);
        position += rest % order.sizes[u] * order.logical_strides[u];
        offset += rest % order.sizes[u] * order.strides[u];
        rest /= order.sizes[u];
      }
      for (int64_t lane = 0; lane < elements; lane += kRunLanes)
        fingerprint::add(s, lane_sums(p + offset + lane, n, stride, step, position,
                                      tiles.offsets.data() + lane, std::min(kRunLanes, elements - lane)));
      unit += n;
    }
    return s;
  });
}

// fn(begin, end) over [0, n) in one chunk per thread; the exact sums added in any order.
template <class Fn>
fingerprint::Sums parallel_sums(int64_t n, int64_t work, const Fn& fn) {
  fingerprint::Sums total;
#pragma omp parallel if (work > kParallelGrain)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const fingerprint::Sums mine = fn(n * t / threads, n * (t + 1) / threads);
#pragma omp critical
    fingerprint::add(total, mine);
  }
  return total;
}

uint64_t fingerprint_cpu(const Tensor& x) {
  return dispatch_any(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    const int64_t n = x.numel();
    if (x.is_contiguous() || n <= 1)
      return fingerprint::finish(parallel_sums(n, n, [&](int64_t b, int64_t e) { return chunk_sums(p, b, e); }));
    const MemoryOrder order = memory_order(x);
    if (const std::optional<Tiles> tiles = tiles_of(order)) {
      const int64_t units = n / static_cast<int64_t>(tiles->offsets.size());
      return fingerprint::finish(
          parallel_sums(units, n, [&](int64_t b, int64_t e) { return tiled_sums(p, order, *tiles, b, e); }));
    }
    const int64_t rows = n / order.sizes.back();
    return fingerprint::finish(
        parallel_sums(rows, n, [&](int64_t b, int64_t e) { return strided_sums(p, order, b, e); }));
  });
}

const bool registered =
    kernels::add_kernel(kernels::fingerprint, DeviceType::CPU, &fingerprint_cpu, kernels::SixteenBit::Native);

}  // namespace
}  // namespace ember::cpu
