#pragma once
// BERT's WordPiece tokenizer, giving the ids Hugging Face's `tokenizers` gives with a BERT
// vocabulary (BertWordPieceTokenizer, or the tokenizer.json of bert-base-uncased and models
// built on it such as sentence-transformers' all-MiniLM-L6-v2). Text goes through
//   1. the special tokens: [CLS], [SEP], [PAD], [UNK] and [MASK] written in the text are those
//      tokens (matched in the raw text, case and all);
//   2. normalization (data/bert_text.h): control characters dropped, whitespace made ' ', CJK
//      ideographs spaced out, accents stripped, lower case;
//   3. pre-tokenization: words split at whitespace, each punctuation character a word;
//   4. WordPiece: each word split greedily into the longest pieces in the vocabulary, pieces
//      after the first written with the "##" prefix; a word with a part no piece covers, or
//      longer than max_input_chars_per_word characters, is [UNK].
// Text must be UTF-8; anything else is an ember::Error naming the byte offset.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::data {

struct WordPieceOptions {
  bool lower_case = true;              // BERT uncased: lower-case
  bool strip_accents = true;           // NFD-decompose and drop nonspacing marks (Mn)
  bool tokenize_chinese_chars = true;  // CJK ideographs become words of their own
  int64_t max_input_chars_per_word = 100;  // longer words become [UNK]
};

// One sequence or pair, after special tokens, truncation and padding.
struct Encoding {
  std::vector<int64_t> ids, token_type_ids, attention_mask;
};

class WordPieceTokenizer {
 public:
  // Reads a vocabulary with one token per line, the token's id being its line number counted
  // from 0 ("\n" or "\r\n" line ends). Throws ember::Error naming the file (and the line) when
  // it cannot be read, is empty, has an empty or duplicate token or a line that is not UTF-8, or
  // lacks [UNK], [CLS], [SEP] or [PAD].
  static WordPieceTokenizer from_vocab_file(const std::string& vocab_txt, WordPieceOptions options = {});
  // The same from the file's contents; `name` stands for the file in messages.
  static WordPieceTokenizer from_vocab(std::string_view contents, const std::string& name,
                                       WordPieceOptions options = {});

  std::vector<std::string> tokenize(std::string_view text) const;   // word pieces, no specials
  std::vector<int64_t> encode_tokens(std::string_view text) const;  // ids, no specials
  // [CLS] a [SEP], or [CLS] a [SEP] b [SEP] with token type 1 for b and its [SEP]; truncated to
  // max_length tokens in all, a pair with the longest-first strategy (Note [Longest-first
  // truncation]); no padding. max_length must leave room for the special tokens.
  Encoding encode(std::string_view a, std::optional<std::string_view> b = std::nullopt,
                  int64_t max_length = 512) const;
  // Each text encoded alone, then padded to the longest in the batch (pad id, token type 0,
  // attention mask 0): int64 tensors [N, T].
  struct Batch {
    Tensor ids, token_type_ids, attention_mask;
  };
  Batch encode_batch(const std::vector<std::string>& texts, int64_t max_length = 512) const;

  int64_t token_to_id(std::string_view token) const;  // throws for a token the vocabulary lacks
  std::string id_to_token(int64_t id) const;          // throws for an id outside [0, vocab_size())
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t cls_id() const { return cls_; }
  int64_t sep_id() const { return sep_; }
  int64_t pad_id() const { return pad_; }
  int64_t unk_id() const { return unk_; }
  const WordPieceOptions& options() const { return options_; }

 private:
  WordPieceTokenizer() = default;
  std::optional<int64_t> find(std::string_view token) const;
  void append_word_pieces(std::u32string_view word, std::vector<int64_t>& ids) const;

  // std::hash over string_view, so that lookups by a view need no std::string.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  std::vector<std::string> tokens_;
  // The special tokens the text may name ([MASK] only when the vocabulary has it).
  std::vector<std::pair<std::string, int64_t>> specials_;
  size_t longest_token_ = 0;  // in bytes: no piece to look up is longer
  int64_t cls_ = 0, sep_ = 0, pad_ = 0, unk_ = 0;
  WordPieceOptions options_;
};

}  // namespace ember::data
