// The vocabulary, special tokens, WordPiece itself, and the encodings built from its ids.
#include "data/wordpiece.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "data/bert_text.h"
#include "data/utf8.h"

namespace ember::data {

namespace {

constexpr std::string_view kContinuation = "##";  // the prefix of pieces after a word's first

// The special tokens BERT's vocabularies define; all but [MASK] are required.
constexpr std::string_view kUnk = "[UNK]", kCls = "[CLS]", kSep = "[SEP]", kPad = "[PAD]", kMask = "[MASK]";

std::string_view trim_end(std::string_view line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r' || line.back() == '\v' ||
                           line.back() == '\f'))
    line.remove_suffix(1);
  return line;
}

// Does `text` hold `token` (ASCII) at position i?
bool matches_at(std::u32string_view text, size_t i, std::string_view token) {
  if (text.size() - i < token.size()) return false;
  for (size_t k = 0; k < token.size(); ++k)
    if (text[i + k] != static_cast<unsigned char>(token[k])) return false;
  return true;
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& vocab_txt, WordPieceOptions options) {
  EMBER_CHECK(std::filesystem::is_regular_file(vocab_txt), "[WordPieceTokenizer] ", vocab_txt, ": no such file");
  std::ifstream in(vocab_txt, std::ios::binary);
  std::string contents(std::istreambuf_iterator<char>(in), {});
  EMBER_CHECK(!in.bad(), "[WordPieceTokenizer] ", vocab_txt, ": cannot read the file");
  return from_vocab(contents, vocab_txt, options);
}

WordPieceTokenizer WordPieceTokenizer::from_vocab(std::string_view contents, const std::string& name,
                                                  WordPieceOptions options) {
  EMBER_CHECK(options.max_input_chars_per_word > 0,
              "[WordPieceTokenizer] max_input_chars_per_word must be positive, got ", options.max_input_chars_per_word);
  WordPieceTokenizer t;
  t.options_ = options;
  // One token a line; trailing whitespace (a "\r" included) is not part of it, as in Hugging
  // Face's reader, and a last line without "\n" counts.
  size_t line_no = 0;
  for (size_t pos = 0; pos < contents.size(); ++line_no) {
    const size_t end = std::min(contents.find('\n', pos), contents.size());
    const std::string_view token = trim_end(contents.substr(pos, end - pos));
    pos = end + 1;
    const std::string where = "[WordPieceTokenizer] " + name + ":" + std::to_string(line_no + 1);
    EMBER_CHECK(!token.empty(), where, ": empty token (every line of a vocabulary is a token)");
    decode_utf8(token, where);
    const auto [it, added] = t.ids_.emplace(token, static_cast<int64_t>(line_no));
    EMBER_CHECK(added, where, ": the token '", token, "' appears again (first on line ", it->second + 1, ")");
    t.tokens_.emplace_back(token);
    t.longest_token_ = std::max(t.longest_token_, token.size());
  }
  EMBER_CHECK(!t.tokens_.empty(), "[WordPieceTokenizer] ", name, ": the vocabulary holds no tokens");
  auto special = [&](std::string_view token) {
    const std::optional<int64_t> id = t.find(token);
    EMBER_CHECK(id.has_value(), "[WordPieceTokenizer] ", name, ": the vocabulary has no ", token,
                " token (a BERT vocabulary has [PAD], [UNK], [CLS] and [SEP])");
    t.specials_.emplace_back(token, *id);
    return *id;
  };
  t.unk_ = special(kUnk);
  t.cls_ = special(kCls);
  t.sep_ = special(kSep);
  t.pad_ = special(kPad);
  if (t.find(kMask)) special(kMask);
  return t;
}

std::optional<int64_t> WordPieceTokenizer::find(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

int64_t WordPieceTokenizer::token_to_id(std::string_view token) const {
  const std::optional<int64_t> id = find(token);
  EMBER_CHECK(id.has_value(), "[WordPieceTokenizer::token_to_id] no token '", token, "' in the vocabulary");
  return *id;
}

std::string WordPieceTokenizer::id_to_token(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < vocab_size(), "[WordPieceTokenizer::id_to_token] id ", id, " is not in [0, ",
              vocab_size(), ")");
  return tokens_[static_cast<size_t>(id)];
}

// Greedy longest match first: the longest prefix of the rest of the word that is in the
// vocabulary (with the "##" prefix after the first piece) is the next piece. A word the pieces
// cannot cover is one [UNK], not pieces and [UNK]s.
void WordPieceTokenizer::append_word_pieces(std::u32string_view word, std::vector<int64_t>& ids) const {
  if (static_cast<int64_t>(word.size()) > options_.max_input_chars_per_word) {
    ids.push_back(unk_);
    return;
  }
  std::string bytes;
  std::vector<size_t> bounds{0};  // bounds[k]: the byte offset of character k
  for (char32_t c : word) {
    append_utf8(c, bytes);
    bounds.push_back(bytes.size());
  }
  const size_t first = ids.size();
  std::string candidate;
  for (size_t start = 0; start < word.size();) {
    std::optional<int64_t> piece;
    const std::string_view prefix = start == 0 ? "" : kContinuation;
    // The longest candidate that could be in the vocabulary ends at the last character boundary
    // within longest_token_ bytes (with the prefix): found by binary search rather than by
    // walking down from the word's end, which made a long word quadratic in its length.
    const size_t room = longest_token_ > prefix.size() ? longest_token_ - prefix.size() : 0;
    size_t end = static_cast<size_t>(std::upper_bound(bounds.begin() + static_cast<std::ptrdiff_t>(start),
                                                      bounds.end(), bounds[start] + room) -
                                     bounds.begin()) - 1;
    for (; end > start; --end) {
      candidate.assign(prefix);
      candidate.append(bytes, bounds[start], bounds[end] - bounds[start]);
      if ((piece = find(candidate))) break;
    }
    if (!piece) {
      ids.resize(first);
      ids.push_back(unk_);
      return;
    }
    ids.push_back(*piece);
    start = end;
  }
}

std::vector<int64_t> WordPieceTokenizer::encode_tokens(std::string_view text) const {
  const std::u32string chars = decode_utf8(text, "[WordPieceTokenizer] text");
  std::vector<int64_t> ids;
  auto add_segment = [&](std::u32string_view segment) {
    for (const std::u32string& word : bert_pre_tokenize(bert_normalize(segment, options_)))
      append_word_pieces(word, ids);
  };
  // Special tokens are found in the raw text, before normalization: "[CLS]" is one token, but
  // "[cls]" is three, '[', "cls" and ']'. The longest match wins where two start together.
  const std::u32string_view all(chars);
  size_t segment_start = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] != U'[') continue;
    const std::pair<std::string, int64_t>* best = nullptr;
    for (const auto& special : specials_)
      if (matches_at(all, i, special.first) && (!best || special.first.size() > best->first.size())) best = &special;
    if (!best) continue;
    add_segment(all.substr(segment_start, i - segment_start));
    ids.push_back(best->second);
    segment_start = i + best->first.size();
    i = segment_start - 1;
  }
  add_segment(all.substr(segment_start));
  return ids;
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> pieces;
  for (int64_t id : encode_tokens(text)) pieces.push_back(id_to_token(id));
  return pieces;
}

// Note [Longest-first truncation]
// A pair longer than max_length loses tokens from the ends of its sequences, the longer first,
// as Hugging Face's "longest_first" strategy does. With room for n tokens besides the special
// ones: if the shorter sequence fits in half of n, it stays whole and the longer is cut to the
// rest; otherwise each gets half, and the odd token goes to the one that was longer (to b when
// they were equal). (Measured against `tokenizers` for every pair of lengths up to 8 and every
// max_length up to 19: tests/fixtures/make_wordpiece_fixtures.py checks random ones.)
Encoding WordPieceTokenizer::encode(std::string_view a, std::optional<std::string_view> b, int64_t max_length) const {
  const int64_t specials = b ? 3 : 2;
  EMBER_CHECK(max_length >= specials, "[WordPieceTokenizer::encode] max_length ", max_length,
              " leaves no room: the encoding of ", b ? "a pair" : "one text", " holds ", specials, " special tokens");
  std::vector<int64_t> ids_a = encode_tokens(a), ids_b = b ? encode_tokens(*b) : std::vector<int64_t>{};
  auto na = static_cast<int64_t>(ids_a.size()), nb = static_cast<int64_t>(ids_b.size());
  const int64_t room = max_length - specials;
  if (na + nb > room) {
    const int64_t shorter = std::min(na, nb);
    if (shorter <= room - shorter) {
      (na > nb ? na : nb) = room - shorter;
    } else {
      const int64_t high = (room + 1) / 2, low = room / 2;
      std::tie(na, nb) = na > nb ? std::pair(high, low) : std::pair(low, high);
    }
    ids_a.resize(static_cast<size_t>(na));
    ids_b.resize(static_cast<size_t>(nb));
  }
  Encoding e;
  auto add = [&](int64_t id, int64_t type) {
    e.ids.push_back(id);
    e.token_type_ids.push_back(type);
    e.attention_mask.push_back(1);
  };
  add(cls_, 0);
  for (int64_t id : ids_a) add(id, 0);
  add(sep_, 0);
  if (b) {
    for (int64_t id : ids_b) add(id, 1);
    add(sep_, 1);
  }
  return e;
}

WordPieceTokenizer::Batch WordPieceTokenizer::encode_batch(const std::vector<std::string>& texts,
                                                           int64_t max_length) const {
  std::vector<Encoding> encodings;
  size_t longest = 0;
  for (const std::string& text : texts) {
    encodings.push_back(encode(text, std::nullopt, max_length));
    longest = std::max(longest, encodings.back().ids.size());
  }
  const Shape shape{static_cast<int64_t>(texts.size()), static_cast<int64_t>(longest)};
  Batch batch{empty(shape, kInt64), empty(shape, kInt64), empty(shape, kInt64)};
  int64_t* ids = batch.ids.data<int64_t>();
  int64_t* types = batch.token_type_ids.data<int64_t>();
  int64_t* mask = batch.attention_mask.data<int64_t>();
  for (const Encoding& e : encodings) {
    const size_t n = e.ids.size();
    std::copy_n(e.ids.begin(), n, ids);
    std::copy_n(e.token_type_ids.begin(), n, types);
    std::copy_n(e.attention_mask.begin(), n, mask);
    std::fill(ids + n, ids + longest, pad_);
    std::fill(types + n, types + longest, 0);
    std::fill(mask + n, mask + longest, 0);
    ids += longest, types += longest, mask += longest;
  }
  return batch;
}

}  // namespace ember::data
