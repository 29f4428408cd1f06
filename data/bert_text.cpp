// BERT's normalization and pre-tokenization over the tables of data/unicode.h.
#include "data/bert_text.h"

#include <algorithm>

#include "data/unicode.h"

namespace ember::data {

namespace {

// Note [Stripping accents keeps NFD's order]
// Stripping accents is NFD, then dropping the nonspacing marks. NFD decomposes each character
// and then sorts every run of combining characters (class > 0) by class, stably; the marks
// dropped afterwards do not change where the others end up, with one exception: a nonspacing
// mark of class 0 (a starter, such as U+034F COMBINING GRAPHEME JOINER) ends a run, so the
// characters on either side of it are never sorted past each other. So marks of class > 0 are
// dropped at once, a mark of class 0 stays as a barrier until the runs are sorted, and the
// characters that remain in a run (classes > 0 that are not nonspacing marks, such as the
// musical stems U+1D165) are sorted as NFD sorts them.
constexpr char32_t kBarrier = 0x110000;  // above Unicode: class 0, in no table

std::u32string strip_accents(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (unicode::flags(c) & unicode::kMark) {
      if (unicode::combining_class(c) == 0) out += kBarrier;
    } else {
      unicode::append_stripped(c, out);
    }
  }
  for (size_t i = 0; i < out.size();) {
    if (unicode::combining_class(out[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < out.size() && unicode::combining_class(out[end]) != 0) ++end;
    std::stable_sort(out.begin() + static_cast<ptrdiff_t>(i), out.begin() + static_cast<ptrdiff_t>(end),
                     [](char32_t x, char32_t y) { return unicode::combining_class(x) < unicode::combining_class(y); });
    i = end;
  }
  std::erase(out, kBarrier);
  return out;
}

}  // namespace

std::u32string bert_normalize(std::u32string_view text, const WordPieceOptions& options) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    const uint8_t f = unicode::flags(c);
    if (f & unicode::kDrop) continue;
    if (f & unicode::kSpace) {
      out += U' ';
    } else if (options.tokenize_chinese_chars && (f & unicode::kCjk)) {
      out += U' ';
      out += c;
      out += U' ';
    } else {
      out += c;
    }
  }
  if (options.strip_accents) out = strip_accents(out);
  if (options.lower_case) {
    std::u32string lower;
    lower.reserve(out.size());
    for (char32_t c : out) unicode::append_lowercase(c, lower);
    out = std::move(lower);
  }
  return out;
}

std::vector<std::u32string> bert_pre_tokenize(std::u32string_view normalized) {
  std::vector<std::u32string> words;
  std::u32string word;
  auto finish = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char32_t c : normalized) {
    const uint8_t f = unicode::flags(c);
    if (f & unicode::kSpace) {
      finish();
    } else if (f & unicode::kPunct) {
      finish();
      words.emplace_back(1, c);
    } else {
      word += c;
    }
  }
  finish();
  return words;
}

}  // namespace ember::data
