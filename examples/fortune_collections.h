#pragma once
// Fortunes labelled by the collection they come from, split into training, validation and test
// sets: the text-classification task of examples/finetune_text.cpp.
#include <cstdint>
#include <string>
#include <vector>

namespace ember::examples {

// The fortunes of one collection file: the entries between lines holding "%", without the
// trailing newline, empty entries dropped. An ember::Error names a file that cannot be read.
std::vector<std::string> read_fortune_entries(const std::string& path);

struct LabelledTexts {
  std::vector<std::string> texts;
  std::vector<int64_t> labels;  // an index into FortuneSplits::collections
};

struct FortuneSplits {
  std::vector<std::string> collections;  // class i's name
  LabelledTexts train, validation, test;
};

// Note [Splitting the fortunes]
// An entry's set is a function of its text alone: the 64-bit FNV-1a hash of its bytes, modulo
// 10, is 0 for the test set, 1 for the validation set and anything else for the training set
// (about 10/10/80%). So the split is the same on every machine, for every seed and whichever
// collections are chosen, and a text never lands in two sets. A text that occurs more than once
// among the chosen collections is kept once if every occurrence has the same label and dropped if
// the labels differ: no answer would be right for it.
FortuneSplits split_fortune_collections(const std::string& dir, const std::vector<std::string>& collections);

}  // namespace ember::examples
