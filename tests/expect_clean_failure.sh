#!/bin/sh
# Runs a program that must reject its input and checks that it fails cleanly: an exit code
# between 1 and 125 (not a signal, so no abort and no crash), the expected text in its output,
# and no sign of std::terminate or a sanitizer report.
#   expect_clean_failure.sh EXPECTED_TEXT PROGRAM [ARGS...]
expected=$1
shift
output=$("$@" 2>&1)
code=$?
printf '%s\n' "$output"
fail() {
  echo "expect_clean_failure: $*" >&2
  exit 1
}
[ "$code" -ge 1 ] && [ "$code" -le 125 ] || fail "exit code $code, expected 1 to 125"
printf '%s' "$output" | grep -qF -- "$expected" || fail "the output does not contain: $expected"
! printf '%s' "$output" | grep -qE 'terminate called|Sanitizer|runtime error:' || fail "an unclean failure"
echo "expect_clean_failure: ok (exit code $code)"
