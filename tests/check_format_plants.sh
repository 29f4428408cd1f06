#!/bin/sh
# Tests of scripts/check-format itself, on a copy of the repository's tracked files (a git
# repository of its own in a temporary folder, whose first commit holds .clang-format): the copy
# passes; a changed line that is not formatted fails the check, naming the file; --fix formats
# it, and then the copy passes again. Lines the change did not touch are never checked.
#   check_format_plants.sh SOURCE_DIR
set -eu
command -v git-clang-format >/dev/null || { echo "check_format_plants: no git-clang-format"; exit 77; }
. "$(dirname "$0")/repository_copy.sh"
copy_repository "$1" check_format_plants

scripts/check-format >/dev/null || fail "check-format fails on the copy before any change"

# A new function written on one line with the pointer on the name: not the style.
printf 'int  *planted_function( int  x ){return  &x==nullptr;}\n' >>core/shape.cpp
if output=$(scripts/check-format 2>&1); then fail "check-format passed an unformatted change"; fi
printf '%s' "$output" | grep -qF "core/shape.cpp" || fail "check-format did not name core/shape.cpp (it said: $output)"

scripts/check-format --fix >/dev/null
grep -qF 'int* planted_function(int x) { return &x == nullptr; }' core/shape.cpp ||
  fail "check-format --fix did not format the planted line: $(tail -1 core/shape.cpp)"
scripts/check-format >/dev/null || fail "check-format fails after --fix"
echo "check_format_plants: ok (the planted line failed the check and --fix formatted it)"
