#pragma once
// What BERT's text normalization needs to know about each code point: which characters the
// normalizer drops or turns into spaces, which are CJK ideographs, punctuation or accents, how
// a character decomposes, its combining class and its lower case. The tables are generated
// (data/unicode_tables.cpp); the lookups are in data/unicode.cpp.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::data::unicode {

// Note [Unicode tables measured from the reference]
// The tokenizer must give the same ids as Hugging Face's `tokenizers`, and that library does not
// follow one Unicode release: its general categories (controls, punctuation, nonspacing marks)
// are older than Python 3.11's unicodedata (Unicode 14), its case mappings newer, and its NFD
// misses one decomposition unicodedata has. A normalizer built on unicodedata differs from it in
// 1,714 code points (marks added since its categories were made are kept, U+2028 and U+2029 are
// whitespace to it, U+A7CB lower-cases, ...). So data/make_unicode_tables.py measures instead:
// it passes every code point alone through BertNormalizer with one step on at a time, and
// through BertPreTokenizer, and records
//   - flags: dropped by clean-up (controls, format characters, NUL, U+FFFD); made ' ' by it
//     (whitespace); padded with spaces as a CJK ideograph; a word of its own to the
//     pre-tokenizer (punctuation); dropped when stripping accents (a nonspacing mark);
//   - its decomposition with the marks dropped, when stripping accents changes it (Hangul
//     syllables decompose by arithmetic instead: Unicode's formula, in unicode.cpp);
//   - its lower case, when lower-casing changes it (one character each, except U+0130 'İ',
//     which becomes "i" plus U+0307).
// Measuring one character at a time is enough because every step maps characters one by one,
// except NFD's canonical reordering: a run of combining characters is sorted by combining
// class, and the combining classes (kCombiningRanges) come from unicodedata, which is safe as
// Unicode never changes a class once assigned. (The lower-casing has no final-sigma rule: 'Σ'
// is 'σ' at the end of a word too, unlike Python's str.lower.)

enum Flag : uint8_t {
  kDrop = 1,    // removed by clean-up
  kSpace = 2,   // whitespace: ' ' after clean-up; the pre-tokenizer splits there
  kCjk = 4,     // a CJK ideograph: a word of its own
  kPunct = 8,   // punctuation: a word of its own
  kMark = 16,   // a nonspacing mark: removed when stripping accents
};

// A range of code points with the same flags, from `first` up to the next range's first.
struct FlagRange {
  char32_t first;
  uint8_t flags;
};
// Every stride-th code point from first to last lower-cases to itself plus delta.
struct CaseRun {
  char32_t first, last;
  int32_t stride, delta;
};
struct LongLowercase {
  char32_t from;
  char32_t to[2];
};
// The decomposition of `from` with its nonspacing marks dropped; unused places are 0.
struct Decomposition {
  char32_t from;
  char32_t to[3];
};
struct CombiningRange {
  char32_t first, last;
  uint8_t combining_class;
};

// The generated tables, sorted by code point.
extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangeCount;
extern const CaseRun kLowercaseRuns[];
extern const size_t kLowercaseRunCount;
extern const LongLowercase kLongLowercase[];
extern const size_t kLongLowercaseCount;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositionCount;
extern const CombiningRange kCombiningRanges[];
extern const size_t kCombiningRangeCount;

uint8_t flags(char32_t c);
// NFD's canonical combining class: 0 for starters.
uint8_t combining_class(char32_t c);
// Appends c's decomposition without nonspacing marks (c itself when it has none) to out; c is
// not a mark itself (kMark): the caller drops those.
void append_stripped(char32_t c, std::u32string& out);
void append_lowercase(char32_t c, std::u32string& out);

}  // namespace ember::data::unicode
