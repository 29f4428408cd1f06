"""Writes data/unicode_tables.cpp: what BERT's text normalization does to each code point.

Run with a Python that has Hugging Face's `tokenizers` (e.g. /work/torch215/bin/python):

    python data/make_unicode_tables.py

The tables are measured, not derived from one Unicode release (Note [Unicode tables measured
from the reference] in data/unicode.h): every code point is passed alone through
`tokenizers`' BertNormalizer with one step switched on at a time, and through its
BertPreTokenizer, and what comes out is recorded. Only the canonical combining classes, which
Unicode never changes once assigned, come from Python's unicodedata.
"""
import os
import sys
import unicodedata

import tokenizers
from tokenizers import normalizers, pre_tokenizers

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3  # decomposed by arithmetic in data/unicode.cpp
# The flag bits of data/unicode.h.
DROP, SPACE, CJK, PUNCT, MARK = 1, 2, 4, 8, 16
MAX_DECOMPOSITION = 3  # Decomposition::to in data/unicode.h


def normalizer(**step):
    options = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    options.update(step)
    return normalizers.BertNormalizer(**options)


def code_points():
    return [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def hangul_nfd(c):
    s = c - HANGUL_FIRST
    out = [0x1100 + s // 588, 0x1161 + s % 588 // 28]
    if s % 28:
        out.append(0x11A7 + s % 28)
    return "".join(map(chr, out))


def measure():
    clean = normalizer(clean_text=True)
    cjk = normalizer(handle_chinese_chars=True)
    strip = normalizer(strip_accents=True)
    lower = normalizer(lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    flags, decompositions, lowercase, spaces = {}, {}, {}, set()
    for c in code_points():
        ch = chr(c)
        f = 0
        cleaned = clean.normalize_str(ch)
        assert cleaned in ("", " ", ch), hex(c)
        f |= DROP if cleaned == "" else SPACE if cleaned == " " else 0
        padded = cjk.normalize_str(ch)
        assert padded in (ch, " " + ch + " "), hex(c)
        f |= CJK if padded != ch else 0
        words = [w for w, _ in pre.pre_tokenize_str("a" + ch + "a")]
        assert words in (["a", ch, "a"], ["a", "a"], ["a" + ch + "a"]), hex(c)
        f |= PUNCT if words == ["a", ch, "a"] else 0
        if words == ["a", "a"]:
            spaces.add(ch)
        stripped = strip.normalize_str(ch)
        if stripped == "":
            f |= MARK
        elif stripped != ch:
            if HANGUL_FIRST <= c <= HANGUL_LAST:
                assert stripped == hangul_nfd(c), hex(c)
            else:
                assert len(stripped) <= MAX_DECOMPOSITION, hex(c)
                decompositions[c] = stripped
        lowered = lower.normalize_str(ch)
        if lowered != ch:
            lowercase[c] = lowered
        flags[c] = f
    # The pre-tokenizer splits on whitespace, which the normalizer's first step has already made
    # ' ' or dropped and which its later steps never make from what is left (U+2000 decomposes to
    # U+2002, but is ' ' by then): so data/bert_text.cpp splits on SPACE alone.
    assert all(flags[ord(ch)] & (SPACE | DROP) for ch in spaces)
    kept = [c for c in flags if not flags[c] & (SPACE | DROP)]
    made = "".join(decompositions.get(c, "") + lowercase.get(c, "") for c in kept)
    assert not spaces.intersection(made)
    return flags, decompositions, lowercase


def flag_ranges(flags):
    """[(first, flags)]: each range runs to the next one's first; the surrogates count as 0."""
    out = []
    for c in range(0x110000):
        f = flags.get(c, 0)
        if not out or out[-1][1] != f:
            out.append((c, f))
    return out


def case_runs(lowercase):
    """Single-character lower-case mappings as runs (first, last, stride, delta): every
    stride-th code point from first to last maps to itself plus delta."""
    runs = []
    for c in sorted(k for k, v in lowercase.items() if len(v) == 1):
        delta = ord(lowercase[c]) - c
        if runs:
            first, last, stride, d = runs[-1]
            step = c - last
            if d == delta and (step == stride or (first == last and step in (1, 2))):
                runs[-1] = (first, c, step, d)
                continue
        runs.append((c, c, 1, delta))
    return runs


def combining_ranges():
    out = []
    for c in code_points():
        ccc = unicodedata.combining(chr(c))
        if not ccc:
            continue
        if out and out[-1][1] == c - 1 and out[-1][2] == ccc:
            out[-1][1] = c
        else:
            out.append([c, c, ccc])
    return out


def rows(items, width=118):
    lines = ["   "]
    for item in items:
        if len(lines[-1]) + 1 + len(item) > width:
            lines.append("   ")
        lines[-1] += " " + item
    return "\n".join(lines)


def main():
    flags, decompositions, lowercase = measure()
    long_lower = {c: v for c, v in lowercase.items() if len(v) > 1}
    assert all(len(v) == 2 for v in long_lower.values())
    flag_items = ["{0x%x, %d}," % r for r in flag_ranges(flags)]
    case_items = ["{0x%x, 0x%x, %d, %d}," % r for r in case_runs(lowercase)]
    long_items = ["{0x%x, {0x%x, 0x%x}}," % (c, ord(v[0]), ord(v[1])) for c, v in sorted(long_lower.items())]
    decomposition_items = ["{0x%x, {%s}}," % (c, ", ".join("0x%x" % ord(x) for x in v))
                           for c, v in sorted(decompositions.items())]
    combining_items = ["{0x%x, 0x%x, %d}," % tuple(r) for r in combining_ranges()]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_tables.cpp")
    with open(path, "w") as f:
        f.write("""// Generated by data/make_unicode_tables.py from Hugging Face tokenizers %s and Python %s's
// unicodedata (Unicode %s): do not edit. Note [Unicode tables measured from the reference] in
// data/unicode.h says what each table holds.
#include "data/unicode.h"

#include <iterator>

namespace ember::data::unicode {

const FlagRange kFlagRanges[] = {
%s
};
const size_t kFlagRangeCount = std::size(kFlagRanges);

const CaseRun kLowercaseRuns[] = {
%s
};
const size_t kLowercaseRunCount = std::size(kLowercaseRuns);

const LongLowercase kLongLowercase[] = {
%s
};
const size_t kLongLowercaseCount = std::size(kLongLowercase);

const Decomposition kDecompositions[] = {
%s
};
const size_t kDecompositionCount = std::size(kDecompositions);

const CombiningRange kCombiningRanges[] = {
%s
};
const size_t kCombiningRangeCount = std::size(kCombiningRanges);

}  // namespace ember::data::unicode
""" % (tokenizers.__version__, sys.version.split()[0], unicodedata.unidata_version,
            rows(flag_items), rows(case_items), rows(long_items), rows(decomposition_items),
            rows(combining_items)))
    print("wrote %s: %d flag ranges, %d lower-case runs, %d decompositions, %d combining ranges"
          % (os.path.relpath(path), len(flag_items), len(case_items), len(decomposition_items), len(combining_items)))


if __name__ == "__main__":
    main()
