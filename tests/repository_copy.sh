# Sourced by the tests of the checkers (check_docs_plants.sh, check_format_plants.sh), which plant
# errors in a copy rather than in the checkout. copy_repository SOURCE_DIR NAME copies the tracked
# files of the git checkout SOURCE_DIR into a temporary folder, removed when the test exits, makes
# it a git repository of its own with one commit, and changes into it; outside a git checkout it
# says so and exits with 77 (skipped). fail TEXT ends the test with NAME's message.
copy_repository() {
  name=$2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cd "$1"
  git rev-parse --show-toplevel >/dev/null 2>&1 || { echo "$name: not a git checkout"; exit 77; }
  git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$work"
  cd "$work"
  git init -q . && git add -A && git -c user.name=t -c user.email=t@t commit -qm copy
}

fail() {
  echo "$name: $*" >&2
  exit 1
}
