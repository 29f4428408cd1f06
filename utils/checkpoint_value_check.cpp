// How a recompute is checked against its forward: CheckpointOptions' determinism_check and
// check_values (utils/checkpoint.h), the Frame's value-check half (utils/checkpoint_frame.h).
//
// Note [Checking the recompute]
// A recompute that does not reproduce the forward would give a silently wrong gradient, so by
// default (determinism_check) each recomputed saved tensor is compared with what the forward
// saved before it is used: its shape, dtype and device, and — check_values — its values, through
// a 64-bit fingerprint (Note [Tensor fingerprints]) taken in the forward's pack hook and again in
// the recompute's. That costs one read of every saved tensor in the forward and of every
// recomputed one in the recompute, and 8 bytes an entry (bench/RESULTS.md has the measured cost);
// the tensors themselves are not kept. The fingerprint is exact, not a tolerance: ember's kernels
// are deterministic, so an honest recompute gives the same bits. Debug mode also fingerprints
// every op's output, to name the first op that differs.
//
// Note [Saved tensors not recomputed]
// Some tensors a region saves are not recomputed at all: a parameter (a Linear saves its
// weight's transposed view), the region's input, an output a policy kept and the recompute
// replays (Note [Selective checkpointing]; attention's q, k and v are views of a kept
// projection). The recompute saves that very view again — of the same storage, still alive, at
// the same version — so it holds the forward's values by construction, and the value check reads
// it in neither pass. The entry remembers the view (SameView, without keeping it alive). Once the
// op that saved it has ended and the policy has decided about it, the forward sees whether the
// view is of a kept output, or of a storage made before the region: Storage::serial() against
// the first serial of the outermost region running on the thread (an inner region's input made
// by an outer region is recomputed by the outer one, so it is fingerprinted). Only other tensors
// get a fingerprint. The recompute fingerprints what is not the same view as the forward's, and
// an entry without a fingerprint that it does not fill with the same view is an error: the tensor
// was written in place since the forward, or the function saved another one there. Once the kept
// outputs are let go (Note [Letting kept outputs go]), a further recompute runs the kept ops
// again, and their outputs are compared with the forward's values where something still holds
// them: an entry not yet taken, or one a retained node took (it is fingerprinted as it is taken).
// One case is left with its shape checked only: a node that unpacks the same saved view of a kept
// output twice in one backward that frees it (a custom Function reading a saved tensor twice),
// after the kept outputs went. In the 16-block GPT planned to half its plain peak, these views
// were 28% of the bytes the recompute's check read.
#include "utils/checkpoint_frame.h"

namespace ember::utils::checkpoint_detail {

void Frame::choose_value_check(Entry& e, const Tensor& t) {
  if (t.storage()->serial() < first_serial_inside) {
    e.known_by = KnownBy::made_before;
  } else if (kept_storages.contains(t.storage().get())) {
    e.known_by = KnownBy::kept_output;
  } else {
    e.known_by = KnownBy::fingerprint;
    e.fingerprint = fingerprints.of(t);
  }
}

void Frame::compare_values(const Entry& e, size_t index, const Tensor& t) {
  ++checkpoint_stats().values_compared;
  const uint64_t f = fingerprints.of(t);
  if (f != e.fingerprint && options.debug)
    EMBER_CHECKPOINT_FAIL("[checkpoint] the first op whose recomputed output differs from the forward's is ",
                          recomputing_op ? recomputing_op : e.op.c_str(), " (recomputed tensor ", index,
                          ", saved by ", e.op, ": fingerprint ", f, " vs ", e.fingerprint, ")");
  if (f != e.fingerprint)
    EMBER_CHECKPOINT_FAIL("[checkpoint] recomputed tensor ", index, " (saved by ", e.op, ", ", shape_str(t.shape()),
                          ") holds other values than the forward saved (fingerprint ", f, " vs ", e.fingerprint,
                          "): the checkpointed function is not deterministic (a random op without "
                          "preserve_rng_state? state that changed between forward and backward?). debug = true "
                          "names the first op whose output differs; check_values = false skips this check");
}

void Frame::know_by_fingerprint(Entry& e) {
  e.fingerprint = fingerprints.of(e.value);
  e.known_by = KnownBy::fingerprint;
}

void Frame::check_value(Entry& e, size_t index, const Tensor& t) {
  if (e.known_by == KnownBy::fingerprint) {
    compare_values(e, index, t);
  } else if (e.known_by == KnownBy::kept_output && kept_let_go) {
    // The kept ops ran again (Note [Letting kept outputs go] in utils/checkpoint.cpp): an entry
    // still holding the forward's values is compared with those (one a retained node took was
    // fingerprinted then, Frame::take).
    if (e.ready) {
      know_by_fingerprint(e);
      compare_values(e, index, t);
    }
  } else {
    const bool written = e.saved.storage.lock() == t.storage() && e.saved.version != t.version();
    EMBER_CHECKPOINT_FAIL("[checkpoint] recomputed tensor ", index, " (saved by ", e.op, ", ", shape_str(t.shape()),
                          ") is not the tensor the forward saved, ",
                          e.known_by == KnownBy::made_before
                              ? "made before the checkpointed region (a parameter or an input)"
                              : "an output the policy kept",
                          ": ", written ? "it was written in place since the forward"
                                        : "the checkpointed function saved another tensor in its place",
                          ". check_values = false skips this check");
  }
}

}  // namespace ember::utils::checkpoint_detail
