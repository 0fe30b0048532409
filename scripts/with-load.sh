#!/usr/bin/env bash
# Runs a command while stress-ng keeps every CPU busy (one CPU worker per
# core), then stops stress-ng whatever the command's outcome. Used by
# `make test-load`: taipan matters most on a loaded host, and its tests must
# pass there too. Exits with the command's status.
set -uo pipefail
if ! command -v stress-ng >/dev/null; then
	echo "with-load: stress-ng is not installed (make deps installs it)" >&2
	exit 1
fi
n=$(nproc)
stress-ng --cpu "$n" --timeout 3h --quiet &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null' EXIT
# Wait until the workers run, not a fixed time.
for _ in $(seq 100); do
	# pgrep -c prints 0 and fails when none runs yet.
	running=$(pgrep -c -P "$load" 2>/dev/null)
	[ "${running:-0}" -ge "$n" ] && break
	sleep 0.1
done
echo "with-load: $n stress-ng CPU workers running; $*" >&2
start=$(date +%s)
"$@"
status=$?
echo "with-load: $* exited $status after $(( $(date +%s) - start )) s under load" >&2
exit "$status"
