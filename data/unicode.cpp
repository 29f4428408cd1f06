// Lookups in the generated tables of data/unicode_tables.cpp, and Hangul's arithmetic.
#include "data/unicode.h"

#include <algorithm>

namespace ember::data::unicode {

namespace {

// Hangul syllables: 19 leading consonants x 21 vowels x 28 trailing consonants (the first
// "none"), numbered from U+AC00; each decomposes into its jamo (Unicode, section 3.12).
constexpr char32_t kSyllableFirst = 0xAC00, kLeadFirst = 0x1100, kVowelFirst = 0x1161, kTrailBase = 0x11A7;
constexpr char32_t kVowels = 21, kTrails = 28, kSyllables = 19 * kVowels * kTrails;

// The last element whose key is <= c, or nullptr.
template <class T, class Key>
const T* last_at_or_below(const T* table, size_t count, char32_t c, Key key) {
  const T* end = table + count;
  const T* it = std::upper_bound(table, end, c, [&](char32_t value, const T& entry) { return value < key(entry); });
  return it == table ? nullptr : it - 1;
}

}  // namespace

uint8_t flags(char32_t c) {
  const FlagRange* range =
      last_at_or_below(kFlagRanges, kFlagRangeCount, c, [](const FlagRange& r) { return r.first; });
  return range ? range->flags : 0;
}

uint8_t combining_class(char32_t c) {
  const CombiningRange* range =
      last_at_or_below(kCombiningRanges, kCombiningRangeCount, c, [](const CombiningRange& r) { return r.first; });
  return range && c <= range->last ? range->combining_class : 0;
}

void append_stripped(char32_t c, std::u32string& out) {
  if (c >= kSyllableFirst && c < kSyllableFirst + kSyllables) {
    const char32_t s = c - kSyllableFirst;
    out += kLeadFirst + s / (kVowels * kTrails);
    out += kVowelFirst + s % (kVowels * kTrails) / kTrails;
    if (s % kTrails != 0) out += kTrailBase + s % kTrails;
    return;
  }
  const Decomposition* d =
      last_at_or_below(kDecompositions, kDecompositionCount, c, [](const Decomposition& e) { return e.from; });
  if (!d || d->from != c) {
    out += c;
    return;
  }
  for (char32_t x : d->to)
    if (x != 0) out += x;
}

void append_lowercase(char32_t c, std::u32string& out) {
  const LongLowercase* l =
      last_at_or_below(kLongLowercase, kLongLowercaseCount, c, [](const LongLowercase& e) { return e.from; });
  if (l && l->from == c) {
    out.append(l->to, 2);
    return;
  }
  const CaseRun* run =
      last_at_or_below(kLowercaseRuns, kLowercaseRunCount, c, [](const CaseRun& r) { return r.first; });
  const bool mapped = run && c <= run->last && (c - run->first) % static_cast<char32_t>(run->stride) == 0;
  out += mapped ? static_cast<char32_t>(static_cast<int32_t>(c) + run->delta) : c;
}

}  // namespace ember::data::unicode
