// libFuzzer target: the WordPiece tokenizer (data/wordpiece.h) on arbitrary vocabularies and
// text. An input with a 0xff byte (which UTF-8 never has) is a vocabulary up to it and a text
// after it; any other input is a text for BERT's real vocabulary (tests/fixtures/wordpiece/),
// encoded alone, as a pair cut in the middle, and truncated to a length its first byte picks.
// Bad input must be an ember::Error; the encodings must hold only the vocabulary's ids, within
// max_length, with as many token types and mask entries as ids. Anything else is a finding.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "data/wordpiece.h"

namespace {

using ember::data::Encoding;
using ember::data::WordPieceTokenizer;

void check(const WordPieceTokenizer& t, const Encoding& e, int64_t max_length) {
  if (static_cast<int64_t>(e.ids.size()) > max_length || e.token_type_ids.size() != e.ids.size() ||
      e.attention_mask.size() != e.ids.size())
    std::abort();
  for (int64_t id : e.ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
}

void encode_all_ways(const WordPieceTokenizer& t, std::string_view text) {
  try {
    for (const std::string& piece : t.tokenize(text)) t.token_to_id(piece);  // every piece is a token
    check(t, t.encode(text), 512);
    const int64_t max_length = 3 + (text.empty() ? 0 : static_cast<unsigned char>(text[0]) % 16);
    check(t, t.encode(text.substr(0, text.size() / 2), text.substr(text.size() / 2), max_length), max_length);
  } catch (const ember::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const WordPieceTokenizer bert = WordPieceTokenizer::from_vocab_file(EMBER_WORDPIECE_VOCAB);
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t separator = input.find('\xff');
  if (separator == std::string_view::npos) {
    encode_all_ways(bert, input);
    return 0;
  }
  try {
    const WordPieceTokenizer t = WordPieceTokenizer::from_vocab(input.substr(0, separator), "fuzz vocabulary");
    encode_all_ways(t, input.substr(separator + 1));
  } catch (const ember::Error&) {
  }
  return 0;
}
