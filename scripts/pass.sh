#!/usr/bin/env bash
# pass.sh NAME COMMAND... - runs one pass of make check and says how long it
# took; each pass's line is kept in build/passes.txt, which check prints at
# the end (the figures CI's log and doc/TESTING.md report).
set -u
name=$1
shift
mkdir -p build
start=$(date +%s)
"$@"
rc=$?
secs=$(($(date +%s) - start))
line=$(printf '%-14s %3dm%02ds%s' "$name" $((secs / 60)) $((secs % 60)) \
	"$([ $rc -eq 0 ] || echo "  (failed: $rc)")")
echo "== pass $line"
echo "$line" >>build/passes.txt
exit $rc
