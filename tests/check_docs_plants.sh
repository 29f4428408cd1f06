#!/bin/sh
# Tests of scripts/check-docs itself: on a copy of the repository's tracked files (a git
# repository of its own in a temporary folder), each planted error must fail the check with its
# message, and the unplanted copy must pass. The plants: a Note pointer naming the wrong file, a
# README size figure far from scripts/count-lines, a folder missing from docs/design.md's layout
# table, an include the dependency table does not allow, and timing figures in a C++ comment and
# in a CMake comment.
#   check_docs_plants.sh SOURCE_DIR
set -eu
. "$(dirname "$0")/repository_copy.sh"
copy_repository "$1" check_docs_plants

# expect_failure TEXT: check-docs fails and prints TEXT; then the copy is restored.
expect_failure() {
  if output=$(python3 scripts/check-docs 2>&1); then fail "check-docs passed with a planted error ($1)"; fi
  printf '%s' "$output" | grep -qF -- "$1" || fail "check-docs did not say: $1 (it said: $output)"
  git checkout -q -- . && git clean -qfd
}

python3 scripts/check-docs >/dev/null || fail "check-docs fails on the unplanted copy"

echo 'See Note [Lane reductions] in core/cpu/parallel.h.' >>docs/internals.md
expect_failure "Note [Lane reductions] is said to be in core/cpu/parallel.h but is defined in core/cpu/lane_reductions.h"

sed -i '0,/in [0-9,]* lines of C++ and CUDA/s//in 1,000 lines of C++ and CUDA/' README.md
expect_failure "README.md:4: says 1,000 lines where scripts/count-lines counts"

sed -i '/^| `distributed\/` |/d' docs/design.md
expect_failure "the layout table (section 1) does not name the folder distributed/"

sed -i '1i #include "nn/module.h"' core/shape.cpp
expect_failure "core/shape.cpp:1: includes nn/module.h, which docs/design.md's dependency table does not allow core/"

sed -i '1i // This loop took 12 ms on the 2-vCPU VM.' core/shape.cpp
expect_failure "core/shape.cpp:1: a comment quotes a timing figure (12 ms)"

sed -i '1i # ember is 1.8x faster than PyTorch here.' bench/CMakeLists.txt
expect_failure "bench/CMakeLists.txt:1: a comment quotes a timing figure (1.8x faster)"

echo "check_docs_plants: ok (6 planted errors found, the copy itself passes)"
