#!/usr/bin/env bash
# demo.sh - run taipan on its built-in demo, or on what the arguments name.
#   scripts/demo.sh                      profile tests/workloads/demo.py for 5 s
#   scripts/demo.sh -p 4242 -d 10        profile a running process
#   scripts/demo.sh -- python3 app.py    profile a command
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
taipan=${TAIPAN:-$here/build/taipan}
sudo=""
if [[ $(id -u) != 0 ]]; then
  sudo=sudo
  echo "taipan loads BPF programs: running it with sudo" >&2
fi

# Profiles are written mode 0600 by their writer: one written through sudo
# is given to the user who asked for it.
mine() {
  local f
  for f in "$@"; do
    if [[ -n $sudo && -f $f ]]; then $sudo chown "$(id -u):$(id -g)" "$f"; fi
  done
}

if (($# > 0)); then
  out=${OUT:-taipan.folded}
  $sudo "$taipan" record -o "$out" "$@"
  mine "$out"
  echo "profile: $out"
  exit 0
fi

# The real interpreter, not a wrapper script such as pyenv's shim.
py=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
out_dir=$here/build/demo
mkdir -p "$out_dir"
echo "taipan demo: profiling $py tests/workloads/demo.py for 5 seconds" >&2
$sudo "$taipan" record -r 250 -o "$out_dir/demo.folded" --folded-lines -- "$py" "$here/tests/workloads/demo.py" 5
$sudo "$taipan" record -q -r 250 -d 3 -o "$out_dir/demo.pb.gz" -- "$py" "$here/tests/workloads/demo.py" 3
mine "$out_dir/demo.folded" "$out_dir/demo.pb.gz"
echo
echo "Hottest stacks (samples, leaf frame last):"
awk '{ c=$NF; sub(/ [0-9]+$/, ""); n=split($0, f, ";"); printf "%d\t%s\n", c, (n>2 ? "...;" f[n-1] ";" f[n] : $0) }' "$out_dir/demo.folded" |
  sort -t$'\t' -k1,1nr | awk -F'\t' 'NR <= 8 { printf "%6d  %s\n", $1, $2 }'
echo
echo "profiles: $out_dir/demo.folded (folded stacks, for flamegraph.pl or inferno)"
echo "          $out_dir/demo.pb.gz (pprof: go tool pprof -top $out_dir/demo.pb.gz)"
