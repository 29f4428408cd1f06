#!/bin/sh
# Checks that docs/guide.md quotes its programs as they are: every code block preceded by a line
# "<!-- file: guide/<name>.cpp -->" must equal that file of docs/guide/, and every program there
# must be quoted. The programs themselves are built and run by the guide_* tests.
#   check_guide_blocks.sh docs/guide.md
set -eu
guide=$1
docs=$(dirname "$guide")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Writes each marked block to $out/<NAME>.cpp.
awk -v out="$out" '
  /^<!-- file: guide\/[A-Za-z0-9_]+\.cpp -->$/ { name = $3; sub("guide/", "", name); want = 1; next }
  want && /^```cpp$/ { file = out "/" name; printf "" > file; inside = 1; want = 0; next }
  inside && /^```$/ { close(file); inside = 0; next }
  inside { print >> file; next }
  { want = 0 }
' "$guide"
status=0
for program in "$docs"/guide/*.cpp; do
  name=$(basename "$program")
  if [ ! -f "$out/$name" ]; then
    echo "check_guide_blocks: $guide does not quote guide/$name (a block after <!-- file: guide/$name -->)"
    status=1
  elif ! diff -u "$program" "$out/$name"; then
    echo "check_guide_blocks: $guide quotes guide/$name differently from the file (diff above)"
    status=1
  fi
done
for quoted in "$out"/*.cpp; do
  [ -e "$quoted" ] || continue
  [ -f "$docs/guide/$(basename "$quoted")" ] || { echo "check_guide_blocks: $guide quotes guide/$(basename "$quoted"), which does not exist"; status=1; }
done
[ $status -eq 0 ] && echo "check_guide_blocks: every program in $docs/guide is quoted as it is"
exit $status
