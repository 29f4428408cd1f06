#pragma once
// BERT's text normalization and pre-tokenization, as Hugging Face's BertNormalizer and
// BertPreTokenizer do them: code points in, words out. The per-character facts come from
// data/unicode.h.
#include <string>
#include <string_view>
#include <vector>

#include "data/wordpiece.h"

namespace ember::data {

// Drops controls, format characters, NUL and U+FFFD; makes whitespace ' '; then, as the options
// say, puts spaces around CJK ideographs, strips accents (NFD without nonspacing marks) and
// lower-cases, in this order.
std::u32string bert_normalize(std::u32string_view text, const WordPieceOptions& options);

// Splits normalized text into words at whitespace; each punctuation character is a word.
std::vector<std::u32string> bert_pre_tokenize(std::u32string_view normalized);

}  // namespace ember::data
