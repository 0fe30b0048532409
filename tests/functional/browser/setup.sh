#!/usr/bin/env bash
# setup.sh - installs the browser tests' npm packages (package.json beside
# this script: playwright-core, ajv, speedscope) into a cache outside the
# clone, once per version of package.json. Prints the node_modules path.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${TAIPAN_NPM_CACHE:-/var/cache/taipan-test/npm}
mkdir -p "$dir"
# Two test runs at once must not install over each other.
exec 9>"$dir/.lock"
flock 9

want=$(sha256sum "$here/package.json" | cut -d' ' -f1)
if [[ ! -f $dir/.installed || $(cat "$dir/.installed") != "$want" || ! -d $dir/node_modules ]]; then
  cp "$here/package.json" "$dir/package.json"
  # No lock file: the versions are exact in package.json.
  (cd "$dir" && npm install --no-audit --no-fund --no-package-lock --loglevel=error >&2)
  echo "$want" >"$dir/.installed"
fi
echo "$dir/node_modules"
