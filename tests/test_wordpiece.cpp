// The WordPiece tokenizer (data/wordpiece.h): the same ids, token types and masks as Hugging
// Face's `tokenizers` on every case of tests/fixtures/wordpiece/cases.txt (fortunes, translated
// messages in many scripts, hard cases, random code points; singles, truncated pairs, and each
// normalization option), encode_batch's padding, and bad vocabularies and bad UTF-8 failing
// with the file, line or byte offset named.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "data/bert_text.h"
#include "data/unicode.h"
#include "data/utf8.h"
#include "data/wordpiece.h"
#include "fixture.h"
#include "temp_dir.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::data;
using testutil::error_of;
using testutil::expect_error;

namespace {

std::string vocab_path() { return testutil::fixtures_dir() + "/wordpiece/vocab.txt"; }

const WordPieceTokenizer& bert() {
  static const WordPieceTokenizer tokenizer = WordPieceTokenizer::from_vocab_file(vocab_path());
  return tokenizer;
}

// One line of cases.txt (its format: tests/fixtures/make_wordpiece_fixtures.py): an encoding,
// or a normalization when `normalized` is set.
struct Case {
  int line = 0;
  WordPieceOptions options;
  int64_t max_length = 0;
  std::string a;
  std::optional<std::string> b;
  Encoding expected;
  std::optional<std::string> normalized;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(s);
  while (std::getline(in, field, sep)) out.push_back(field);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
    } else if (s.at(i + 1) == '\\') {
      out += '\\', i += 1;
    } else {
      out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16)), i += 3;
    }
  }
  return out;
}

std::vector<int64_t> runs(const std::string& field) {  // "0*5 1*3"
  std::vector<int64_t> out;
  for (const std::string& run : split(field, ' ')) {
    const size_t star = run.find('*');
    out.insert(out.end(), std::stoul(run.substr(star + 1)), std::stoll(run.substr(0, star)));
  }
  return out;
}

std::vector<Case> load_cases() {
  const std::string path = testutil::fixtures_dir() + "/wordpiece/cases.txt";
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + " cannot be opened");
  std::vector<Case> cases;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split(line, '\t');
    const bool pair = f.at(0) == "P", normalization = f.at(0) == "N";
    if (f.size() != (normalization ? 4u : pair ? 8u : 7u))
      throw std::runtime_error(path + ":" + std::to_string(line_no) + ": bad line");
    Case c;
    c.line = line_no;
    c.options.lower_case = f[1][0] == 'l';
    c.options.strip_accents = f[1][1] == 's';
    c.options.tokenize_chinese_chars = f[1][2] == 'c';
    if (normalization) {
      c.a = unescape(f[2]);
      c.normalized = unescape(f[3]);
      cases.push_back(std::move(c));
      continue;
    }
    c.max_length = std::stoll(f[2]);
    c.a = unescape(f[3]);
    if (pair) c.b = unescape(f[4]);
    const size_t k = pair ? 5 : 4;
    for (const std::string& id : split(f[k], ' ')) c.expected.ids.push_back(std::stoll(id));
    c.expected.token_type_ids = runs(f[k + 1]);
    c.expected.attention_mask = runs(f[k + 2]);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string options_name(const WordPieceOptions& o) {
  return std::string(o.lower_case ? "l" : "-") + (o.strip_accents ? "s" : "-") + (o.tokenize_chinese_chars ? "c" : "-");
}

}  // namespace

TEST(WordPiece, MatchesHuggingFaceOnEveryFixtureCase) {
  const std::vector<Case> cases = load_cases();
  ASSERT_GT(cases.size(), 3000u);
  std::map<std::string, WordPieceTokenizer> by_options;
  int64_t pairs = 0, truncated = 0, failures = 0;
  for (const Case& c : cases) {
    if (c.normalized) continue;
    const std::string name = options_name(c.options);
    if (!by_options.count(name)) by_options.emplace(name, WordPieceTokenizer::from_vocab_file(vocab_path(), c.options));
    const Encoding e = by_options.at(name).encode(c.a, c.b, c.max_length);
    pairs += c.b.has_value();
    truncated += static_cast<int64_t>(c.expected.ids.size()) == c.max_length;
    if (e.ids == c.expected.ids && e.token_type_ids == c.expected.token_type_ids &&
        e.attention_mask == c.expected.attention_mask)
      continue;
    ADD_FAILURE() << "cases.txt:" << c.line << " (options " << name << ", max_length " << c.max_length
                  << ") differs from Hugging Face's encoding: text '" << c.a << "'";
    if (++failures == 10) break;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(by_options.size(), 5u);  // every combination the fixture has
  EXPECT_GE(pairs, 300);
  EXPECT_GE(truncated, 150);  // the cases truncate
}

// What the normalizer makes of hard cases and random code points, compared as text: the ids
// cannot show it where a word holds a character the vocabulary lacks (Note [Stripping accents
// keeps NFD's order]: the combining marks' order).
TEST(WordPiece, NormalizesAsHuggingFace) {
  int64_t checked = 0;
  for (const Case& c : load_cases()) {
    if (!c.normalized) continue;
    std::string normalized;
    for (char32_t ch : bert_normalize(decode_utf8(c.a, "case"), c.options)) append_utf8(ch, normalized);
    EXPECT_EQ(normalized, *c.normalized) << "cases.txt:" << c.line << " (options " << options_name(c.options) << ")";
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

TEST(WordPiece, EncodeBatchPadsToTheLongest) {
  std::vector<std::string> texts;
  std::vector<Encoding> expected;
  for (const Case& c : load_cases()) {
    if (c.normalized || c.b || c.max_length != 512 || options_name(c.options) != "lsc") continue;
    texts.push_back(c.a);
    expected.push_back(c.expected);
    if (texts.size() == 40) break;
  }
  const WordPieceTokenizer::Batch batch = bert().encode_batch(texts, 512);
  size_t longest = 0;
  for (const Encoding& e : expected) longest = std::max(longest, e.ids.size());
  ASSERT_EQ(batch.ids.shape(), (Shape{40, static_cast<int64_t>(longest)}));
  for (const Tensor& t : {batch.ids, batch.token_type_ids, batch.attention_mask}) {
    EXPECT_EQ(t.dtype(), kInt64);
    EXPECT_EQ(t.shape(), batch.ids.shape());
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t n = expected[i].ids.size();
    for (size_t j = 0; j < longest; ++j) {
      const auto at = [&](const Tensor& t) { return t.data<int64_t>()[i * longest + j]; };
      EXPECT_EQ(at(batch.ids), j < n ? expected[i].ids[j] : bert().pad_id()) << i << "," << j;
      EXPECT_EQ(at(batch.token_type_ids), j < n ? expected[i].token_type_ids[j] : 0) << i << "," << j;
      EXPECT_EQ(at(batch.attention_mask), j < n ? 1 : 0) << i << "," << j;
    }
  }
  // Truncation applies to each text; an empty batch is [0, 0].
  EXPECT_EQ(bert().encode_batch({"one two three four", "five"}, 4).ids.shape(), (Shape{2, 4}));
  EXPECT_EQ(bert().encode_batch({}).ids.shape(), (Shape{0, 0}));
}

TEST(WordPiece, TokensAndVocabulary) {
  const WordPieceTokenizer& t = bert();
  EXPECT_EQ(t.tokenize("Héllo, unaffable [MASK] naïve!"),
            (std::vector<std::string>{"hello", ",", "una", "##ffa", "##ble", "[MASK]", "naive", "!"}));
  EXPECT_EQ(t.encode_tokens("embeddings"), (std::vector<int64_t>{7861, 8270, 4667, 2015}));
  EXPECT_TRUE(t.tokenize(" \t\n").empty());
  EXPECT_EQ(t.vocab_size(), 30522);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.unk_id(), 100);
  EXPECT_EQ(t.cls_id(), 101);
  EXPECT_EQ(t.sep_id(), 102);
  EXPECT_EQ(t.token_to_id("##ing"), 2075);
  EXPECT_EQ(t.id_to_token(2075), "##ing");
  expect_error([&] { t.token_to_id("no-such-token"); }, "no token 'no-such-token' in the vocabulary");
  expect_error([&] { t.id_to_token(30522); }, "id 30522 is not in [0, 30522)");
  expect_error([&] { t.id_to_token(-1); }, "id -1 is not in [0, 30522)");
  expect_error([&] { t.encode("a", "b", 2); }, "max_length 2 leaves no room");
  expect_error([&] { t.encode("a", std::nullopt, 1); }, "max_length 1 leaves no room");
}

TEST(WordPiece, LongWordsAreUnknown) {
  WordPieceOptions options;
  options.max_input_chars_per_word = 5;
  const WordPieceTokenizer t = WordPieceTokenizer::from_vocab_file(vocab_path(), options);
  // Five characters are split into pieces; six are one [UNK], counted in characters, not bytes.
  EXPECT_EQ(t.tokenize("abcde abcdef"), (std::vector<std::string>{"abc", "##de", "[UNK]"}));
  EXPECT_EQ(t.tokenize("ééééé"), bert().tokenize("eeeee"));
  options.max_input_chars_per_word = 0;
  expect_error([&] { WordPieceTokenizer::from_vocab_file(vocab_path(), options); },
               "max_input_chars_per_word must be positive, got 0");
}

// With the length limit raised, a very long word is split in time linear in its length: each
// piece looks only at candidates no longer than the vocabulary's longest token. (Before, every
// piece walked down from the word's end, quadratic in the length: the 1,000,000 characters here
// would take far longer than this test's hang guard in tests/CMakeLists.txt allows;
// bench/RESULTS.md, "Figures that code comments used to quote".)
TEST(WordPiece, AVeryLongWordSplitsIntoItsPieces) {
  WordPieceOptions options;
  options.max_input_chars_per_word = 2'000'000;
  const WordPieceTokenizer t = WordPieceTokenizer::from_vocab_file(vocab_path(), options);
  const std::string word(1'000'000, 'a');
  const std::vector<std::string> pieces = t.tokenize(word);
  std::string joined = pieces.front();  // the pieces spell the word: the first, then each without its ##
  for (size_t i = 1; i < pieces.size(); ++i) {
    ASSERT_TRUE(pieces[i].starts_with("##")) << pieces[i];
    joined += pieces[i].substr(2);
  }
  EXPECT_EQ(joined, word);
  EXPECT_EQ(pieces.front(), t.tokenize(word.substr(0, pieces.front().size())).front());
  // A word no piece covers past its start (U+0133, a letter BERT's vocabulary lacks, alone or as ##) is
  // still one [UNK].
  std::string uncovered = "a";
  for (int i = 0; i < 100'000; ++i) uncovered += "\xc4\xb3";
  EXPECT_EQ(t.tokenize(uncovered), (std::vector<std::string>{"[UNK]"}));
}

TEST(WordPiece, InvalidUtf8NamesTheByteOffset) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ab\xe2\x82", "byte offset 2 (e2 82): a sequence cut short"},
      {"abc\xf0\x9f\x98", "byte offset 3 (f0 9f 98): a sequence cut short"},
      {"\xc3 x", "byte offset 0 (c3): a sequence cut short"},
      {"x\xc0\xaf", "byte offset 1 (c0 af): an overlong encoding"},
      {"\xe0\x80\xaf", "byte offset 0 (e0 80 af): an overlong encoding"},
      {"\xf0\x80\x80\xaf", "byte offset 0 (f0 80 80 af): an overlong encoding"},
      {"ok \xed\xa0\x80", "byte offset 3 (ed a0 80): a UTF-16 surrogate"},
      {"\xed\xbf\xbf", "byte offset 0 (ed bf bf): a UTF-16 surrogate"},
      {"a\x80", "byte offset 1 (80): a continuation byte without a lead byte"},
      {"\xf4\x90\x80\x80", "byte offset 0 (f4 90 80 80): a value above U+10FFFF"},
      {"abcd\xff", "byte offset 4 (ff): a byte that never occurs in UTF-8"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string message = error_of([&] { bert().encode_tokens(text); });
    EXPECT_NE(message.find("[WordPieceTokenizer] text: invalid UTF-8 at " + needle), std::string::npos) << message;
  }
  // The largest code point of each length decodes.
  EXPECT_NO_THROW(bert().encode_tokens("\x7f\xdf\xbf\xef\xbf\xbf\xf4\x8f\xbf\xbf"));
}

TEST(WordPiece, BadVocabularyFiles) {
  ember::testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& contents) {
    std::ofstream(dir.path(name), std::ios::binary) << contents;
    return dir.path(name);
  };
  const std::string specials = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n";
  expect_error([&] { WordPieceTokenizer::from_vocab_file(dir.path("missing.txt")); },
               dir.path("missing.txt") + ": no such file");
  expect_error([&] { WordPieceTokenizer::from_vocab_file(write("empty.txt", "")); },
               "empty.txt: the vocabulary holds no tokens");
  expect_error([&] { WordPieceTokenizer::from_vocab_file(write("blank.txt", specials + "a\n\nb\n")); },
               "blank.txt:6: empty token");
  expect_error([&] { WordPieceTokenizer::from_vocab_file(write("twice.txt", specials + "a\nb\na \n")); },
               "twice.txt:7: the token 'a' appears again (first on line 5)");
  expect_error([&] { WordPieceTokenizer::from_vocab_file(write("bytes.txt", specials + "ok\nb\xff\n")); },
               "bytes.txt:6: invalid UTF-8 at byte offset 1 (ff)");
  for (const std::string token : {"[PAD]", "[UNK]", "[CLS]", "[SEP]"}) {
    std::string without = specials;
    without.erase(without.find(token), token.size() + 1);
    expect_error([&] { WordPieceTokenizer::from_vocab_file(write("no_special.txt", without + "a\n")); },
                 "no_special.txt: the vocabulary has no " + token + " token");
  }
  // "\r\n" line ends and a last line without one; ids are line numbers from 0; no [MASK] needed,
  // so "[MASK]" in the text is plain text.
  const WordPieceTokenizer small =
      WordPieceTokenizer::from_vocab_file(write("crlf.txt", "[UNK]\r\n[SEP]\r\n[PAD]\r\n[CLS]\r\nhello\r\n##s"));
  EXPECT_EQ(small.vocab_size(), 6);
  EXPECT_EQ(small.encode("hellos [MASK]").ids, (std::vector<int64_t>{3, 4, 5, 0, 0, 0, 1}));
}

// The lookups binary-search the generated tables, which must be sorted and cover every code point.
TEST(WordPiece, UnicodeTablesAreSorted) {
  using namespace ember::data::unicode;
  ASSERT_GT(kFlagRangeCount, 0u);
  EXPECT_EQ(kFlagRanges[0].first, 0u);
  for (size_t i = 1; i < kFlagRangeCount; ++i) EXPECT_LT(kFlagRanges[i - 1].first, kFlagRanges[i].first);
  for (size_t i = 1; i < kLowercaseRunCount; ++i) EXPECT_LT(kLowercaseRuns[i - 1].last, kLowercaseRuns[i].first);
  for (size_t i = 1; i < kDecompositionCount; ++i) EXPECT_LT(kDecompositions[i - 1].from, kDecompositions[i].from);
  for (size_t i = 1; i < kCombiningRangeCount; ++i) EXPECT_LT(kCombiningRanges[i - 1].last, kCombiningRanges[i].first);
  for (size_t i = 1; i < kLongLowercaseCount; ++i) EXPECT_LT(kLongLowercase[i - 1].from, kLongLowercase[i].from);
}
