#pragma once
// Character-level text for the language-model example: the fortunes of Debian's `fortunes`
// package, a vocabulary of the bytes that occur in them, and fixed-length training windows.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/dataset.h"

namespace ember::examples {

// Debian's fortunes package installs its collections here.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// Note [Reading the fortunes]
// A fortune collection is a plain text file of fortunes separated by lines holding "%"; beside
// each, `strfile` has written a binary index (<name>.dat) and the package a link <name>.u8 to
// the file itself. read_fortunes() concatenates the plain files only: regular files (no links,
// so nothing is read twice), not ending in .dat or .u8, and not in a subfolder (the package keeps
// its offensive collections in off/). The names are sorted, so the text — and with it the
// vocabulary, the validation split and every run for a seed — is the same on every machine.
std::string read_fortunes(const std::string& dir = kFortunesDir);

// The distinct bytes of a text in increasing order; a byte's id is its rank.
class CharVocab {
 public:
  explicit CharVocab(std::string_view text);
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  // int64 [text.size()]; an ember::Error naming the first byte the vocabulary lacks.
  Tensor encode(std::string_view text) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::string chars_;
  std::vector<int64_t> id_of_;  // by byte value; -1 where the byte does not occur
};

// The examples of next-token prediction in `ids` (int64 [n]): windows of `context` tokens at
// offsets 0, context, 2 * context, ... (those that fit with one token more), each with the
// window shifted by one as its targets. data [windows, context], targets [windows, context].
std::shared_ptr<data::TensorDataset> next_token_windows(const Tensor& ids, int64_t context);

}  // namespace ember::examples
