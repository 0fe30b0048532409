#!/usr/bin/env bash
# install-deps.sh - install the Debian/Ubuntu packages taipan builds and tests with,
# only the ones that are missing. Needs root (or sudo) when something is missing.
set -euo pipefail

# package: what it is for (the README's dependency table says the same)
pkgs=(
  make gcc clang llvm pkg-config    # user space (gcc) and the BPF objects (clang)
  bpftool                           # BPF skeletons; make vmlinux
  libbpf-dev                        # loading BPF, CO-RE relocation, ring buffer
  libelf-dev                        # ELF symbols, sections, program headers
  libdw-dev                         # call-frame information (.eh_frame) for native unwinding
  liblzma-dev                       # MiniDebugInfo (.gnu_debugdata, xz) for native frame names
  g++                               # libstdc++'s __cxa_demangle: C++ names of native frames
  zlib1g-dev                        # gzip of pprof output
  libprotobuf-c-dev protobuf-c-compiler  # pprof and OTLP encoding from their .proto files
  protobuf-compiler python3-protobuf     # the OTLP tests decode taipan's output with the official protos
  libjansson-dev                    # JSON output
  libmicrohttpd-dev                 # the agent's HTTP endpoints
  libcurl4-openssl-dev              # the agent's pushes to Pyroscope
  libncurses-dev                    # the live view of taipan top
  uthash-dev                        # hash tables
  libcmocka-dev                     # C unit tests
  python3-pytest                    # functional tests
  tmux                              # a terminal for the functional tests of taipan top
  man-db                            # the tests render doc/taipan.1 with man -l
  golang-go                         # `go tool pprof`, the tests' pprof reader
  gdb                               # tools/gen_offsets.py reads DWARF with it
  xxd                               # embeds the flame-graph page (src/output/html/) in the binary
  chromium                          # the flame-graph tests open the page in headless Chromium
  linux-perf                        # perf record --call-graph dwarf: the native frames' ground truth
  python3-torch python3-numpy libopenblas0-pthread  # real C++, JIT and BLAS code for the native tests
  libc6-dbg                         # libc's separate debug files, found by build-id in the tests
  libdebuginfod1                    # debug files fetched by build-id (opened with dlopen)
  debuginfod                        # the server the tests fetch them from, on loopback
  stress-ng                         # load on every core for make test-load
  debootstrap                       # Debian roots with the test matrix's other Pythons (make roots)
  musl-tools                        # musl-gcc: make roots builds a CPython and a ruby 3.3 against musl, as Alpine's
  rustc                             # YJIT: make roots builds a static ruby 3.3 with it
  ruby3.1                           # bookworm's Ruby: the Ruby tests (sid's ruby3.3 is in the sid root)
  ruby3.1-dev                       # its headers: the Ruby tests build a C extension that calls back
)

missing=()
for p in "${pkgs[@]}"; do
  [[ $p == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js and npm drive Chromium in the flame-graph tests. Any install will
# do (a machine may have one from elsewhere, whose nodejs package bundles npm
# and conflicts with Debian's npm package), so look for the commands.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "taipan: installing missing packages: ${missing[*]}" >&2
sudo=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "taipan: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
