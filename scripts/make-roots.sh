#!/usr/bin/env bash
# make-roots.sh - Debian roots holding the Pythons that taipan's tests run
# besides the host's: bullseye (3.9) and sid (3.13, 3.14, 3.15 and their
# debug builds, and ruby3.3); and, built from Debian's sources on the host, a
# free-threaded 3.13, a 3.11 against musl, a static ruby 3.3 with YJIT and a
# ruby 3.3 against musl with libruby shared.
# Built with debootstrap into a cache outside the clone, with
# a private apt configuration in each root; the host's apt sources are never
# touched. Idempotent: a root that is complete is left alone.
#
#   scripts/make-roots.sh [--bench] [CACHE]   (default $TAIPAN_ROOTS or /var/cache/taipan-test)
#
# --bench also builds trixie with Austin and its python3.13, which only
# `make bench` uses to compare profilers.
set -euo pipefail

bench=0
if [[ ${1:-} == --bench ]]; then
  bench=1
  shift
fi
cache=${1:-${TAIPAN_ROOTS:-/var/cache/taipan-test}}
log=$cache/make-roots.log

# The mirror the host already uses for Debian, read from apt's own
# configuration (one-line or deb822 sources alike).
mirror=$(apt-cache policy 2>/dev/null | awk '$3 ~ /^bookworm\/main$/ && $2 ~ /^https?:\/\// { print $2; exit }')
if [[ -z $mirror ]]; then
  echo "make-roots: cannot find the Debian mirror in apt's configuration (apt-get update first?)" >&2
  exit 1
fi
command -v debootstrap >/dev/null || { echo "make-roots: debootstrap is not installed" >&2; exit 1; }
mkdir -p "$cache"

# build_root NAME SUITE PACKAGE…
build_root() {
  local name=$1 suite=$2
  shift 2
  local root=$cache/$name
  local want
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  if [[ -e $root/.taipan-packages && $(cat "$root/.taipan-packages") == "$want" ]]; then
    return 0
  fi
  local t0=$SECONDS
  if [[ ! -e $root/.taipan-debootstrap ]]; then
    echo "make-roots: debootstrap $suite into $root (a few minutes, once)" >&2
    rm -rf "$root"
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >>"$log" 2>&1 || {
      echo "make-roots: debootstrap $suite failed; see $log" >&2
      exit 1
    }
    touch "$root/.taipan-debootstrap"
  fi
  # The root's own apt configuration: its suite from the same mirror, and
  # no check of Valid-Until (sid's Release file can be past it).
  echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
  printf 'Acquire::Check-Valid-Until "false";\nAPT::Install-Recommends "false";\n' \
    >"$root/etc/apt/apt.conf.d/99taipan"
  echo "make-roots: installing into $name: $*" >&2
  if ! chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
      sh -c "apt-get update -qq && apt-get install -y -qq $*" >>"$log" 2>&1; then
    echo "make-roots: apt-get install in $name failed; see $log" >&2
    exit 1
  fi
  echo "$want" >"$root/.taipan-packages"
  echo "make-roots: $name ready in $((SECONDS - t0)) s" >&2
}

# build_free_threaded VERSION: CPython's free-threaded build (PEP 703,
# ./configure --disable-gil), which Debian does not ship, compiled from the
# python3.13 source package that the sid root's apt fetches and checks, on the
# host, without PGO, and installed into the sid root as
# /opt/python3.13t/bin/python3.13t. Rebuilt only when VERSION changes.
build_free_threaded() {
  local version=$1 root=$cache/sid
  local prefix=/opt/python3.13t stamp=$root/opt/python3.13t/.taipan-source
  local want="python3.13=$version --disable-gil"
  if [[ -e $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  local t0=$SECONDS src=$cache/build-3.13t
  echo "make-roots: building CPython $version free-threaded into sid:$prefix (about 2 minutes on 2 CPUs, once)" >&2
  # The source list is there only for this download: with it, every later
  # apt-get update in the root would fetch the whole Sources index.
  echo "deb-src $mirror sid main" >"$root/etc/apt/sources.list.d/taipan-src.list"
  rm -rf "$src"
  mkdir -p "$src"
  # sid drops old sources: when $version is gone, the newest python3.13
  # source it has is built instead.
  local fetch="apt-get source -qq --download-only python3.13=$version ||
    { echo 'make-roots: python3.13=$version is gone from sid; fetching its newest python3.13 source';
      apt-get source -qq --download-only python3.13; }"
  if ! chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      sh -c "apt-get update -qq && cd /tmp && rm -f python3.13_* && { $fetch; }" >>"$log" 2>&1; then
    rm -f "$root/etc/apt/sources.list.d/taipan-src.list"
    echo "make-roots: apt-get source python3.13 in sid failed; see $log" >&2
    exit 1
  fi
  rm -f "$root/etc/apt/sources.list.d/taipan-src.list"
  local tars
  shopt -s nullglob
  tars=("$root"/tmp/python3.13_*.orig.tar.*)
  shopt -u nullglob
  if ((${#tars[@]} == 0)); then
    echo "make-roots: apt-get source left no python3.13 orig tarball in $root/tmp; see $log" >&2
    exit 1
  fi
  if ! tar -xf "${tars[0]}" -C "$src" --strip-components=1 2>>"$log"; then
    echo "make-roots: cannot unpack ${tars[0]}; see $log" >&2
    exit 1
  fi
  rm -f "$root"/tmp/python3.13_*
  # make install installs the executable as python3.13t (and python3.13).
  if ! (cd "$src" && ./configure --disable-gil --prefix=$prefix --without-ensurepip \
          --disable-test-modules && make -j"$(nproc)" && make install DESTDIR="$root") \
          >>"$log" 2>&1; then
    echo "make-roots: building the free-threaded CPython failed; see $log" >&2
    exit 1
  fi
  rm -rf "$src"
  echo "$want" >"$stamp"
  echo "make-roots: python3.13t ready in $((SECONDS - t0)) s" >&2
}

# debian_source PACKAGE VERSION SUITE DIR: the orig tarball of Debian's source
# package PACKAGE=VERSION from SUITE, fetched and checked by apt with a source
# list and state of its own under $cache/apt-src (the host's apt configuration
# is left as it is), unpacked into DIR.
debian_source() {
  local pkg=$1 version=$2 suite=$3 dir=$4 apt=$cache/apt-src
  rm -rf "$apt"
  mkdir -p "$apt/lists/partial" "$dir"
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$suite" >"$apt/src.sources"
  local opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt" -o "Dir::State::Lists=$apt/lists"
              -o "Acquire::Check-Valid-Until=false")
  if ! { apt-get "${opts[@]}" update -qq && (cd "$apt" && apt-get "${opts[@]}" source -qq --download-only \
           "$pkg=$version"); } >>"$log" 2>&1; then
    echo "make-roots: apt-get source $pkg=$version failed; see $log" >&2
    exit 1
  fi
  if ! tar -xf "$apt/${pkg}_"*.orig.tar.* -C "$dir" --strip-components=1 2>>"$log"; then
    echo "make-roots: cannot unpack $pkg's source; see $log" >&2
    exit 1
  fi
  rm -rf "$apt"
}

# musl_cc DIR: DIR/musl-cc, musl-gcc as configure can use it. configure takes
# gcc's --print-multiarch (x86_64-linux-gnu) against musl's triplet and stops:
# the wrapper answers nothing to it.
musl_cc() {
  command -v musl-gcc >/dev/null || { echo "make-roots: musl-gcc (musl-tools) is not installed" >&2; exit 1; }
  printf '#!/bin/sh\n[ "$1" = "--print-multiarch" ] && exit 0\nexec musl-gcc "$@"\n' >"$1/musl-cc"
  chmod +x "$1/musl-cc"
}

# build_musl VERSION: Debian bookworm's python3.11 source (VERSION), built with
# musl-gcc (Debian's musl-tools), as Alpine's Python is built against musl:
# the interpreter alone (`make python`, no extension modules), run from its
# build tree $cache/musl-3.11/python, which finds its Lib/ there. About a
# minute on 2 CPUs, once.
build_musl() {
  local version=$1 dir=$cache/musl-3.11
  local stamp=$dir/.taipan-source want="python3.11=$version musl"
  if [[ -e $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  local t0=$SECONDS
  echo "make-roots: building CPython $version with musl-gcc into $dir (about a minute, once)" >&2
  rm -rf "$dir"
  debian_source python3.11 "$version" bookworm "$dir"
  musl_cc "$dir"
  if ! (cd "$dir" && ./configure CC="$dir/musl-cc" --disable-shared --without-ensurepip \
          --disable-test-modules && make -j"$(nproc)" python) >>"$log" 2>&1; then
    echo "make-roots: building CPython with musl-gcc failed; see $log" >&2
    exit 1
  fi
  echo "$want" >"$stamp"
  echo "make-roots: musl CPython ready in $((SECONDS - t0)) s" >&2
}

# build_ruby_static VERSION: Debian trixie's ruby3.3 source (VERSION) built as
# one executable linked statically with libruby (./configure --disable-shared),
# with YJIT (Rust: Debian's rustc), as a Ruby that maps no libruby: its
# execution context is a TLS variable of the executable itself, reached
# through the local-exec model. Debian's compiler flags. Only the interpreter
# (`make ruby`) and the encodings (`make encs`), no extension modules and no
# install: the tests run it from its build tree with --disable-gems, as
# $cache/ruby-3.3-static/ruby-stripped, which is `ruby` stripped of its symbol
# table and debug information as Debian strips its packages (its exported
# functions stay, in .dynsym). About 3 minutes on 2 CPUs, once.
build_ruby_static() {
  local version=$1 dir=$cache/ruby-3.3-static
  local stamp=$dir/.taipan-source want="ruby3.3=$version --disable-shared --enable-yjit"
  if [[ -e $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  # Debian's rustc by its path: a rustup toolchain earlier in PATH is not it.
  [[ -x /usr/bin/rustc ]] || { echo "make-roots: Debian's rustc is not installed (make deps)" >&2; exit 1; }
  local t0=$SECONDS
  echo "make-roots: building Ruby $version static with YJIT into $dir (about 3 minutes, once)" >&2
  rm -rf "$dir"
  debian_source ruby3.3 "$version" trixie "$dir"
  # Debian's compiler flags (dpkg-buildflags: -O2, stack protector, CET;
  # PIE is gcc's default), so that the code that reads the TLS is a
  # distribution's. CFLAGS given replaces Ruby's optflags and debugflags.
  if ! (cd "$dir" && ./configure --disable-shared --enable-yjit --disable-install-doc \
          --without-gmp --prefix="$dir/prefix" RUSTC=/usr/bin/rustc \
          CFLAGS="-g -O2 -fstack-protector-strong -fstack-clash-protection -fcf-protection" &&
        make -j"$(nproc)" ruby && make -j"$(nproc)" encs &&
        strip -o ruby-stripped ruby) >>"$log" 2>&1; then
    echo "make-roots: building the static Ruby failed; see $log" >&2
    exit 1
  fi
  echo "$want" >"$stamp"
  echo "make-roots: static Ruby ready in $((SECONDS - t0)) s" >&2
}

# build_ruby_musl VERSION: the same ruby3.3 source built with musl-gcc, with
# libruby shared (./configure --enable-shared), as Alpine builds its ruby: the
# execution context is a TLS variable of libruby.so, reached through the
# general-dynamic model and musl's DTV, not glibc's. Without YJIT: Debian's
# rustc has no musl target. Alpine's ruby flags (-O2, no omitted frame
# pointer, no strict aliasing, stack clash protection). Only the interpreter
# and the encodings, no extension modules and no install: the tests run
# $cache/ruby-3.3-musl/ruby-stripped with --disable-gems from the build tree,
# which loads stripped/libruby.so.3.3 there through its run path; both are
# stripped as Alpine strips its packages (the library keeps its exported
# symbols, in .dynsym). About 2 minutes on 2 CPUs, once.
build_ruby_musl() {
  local version=$1 dir=$cache/ruby-3.3-musl
  local stamp=$dir/.taipan-source want="ruby3.3=$version musl --enable-shared --eh-frame-hdr"
  if [[ -e $stamp && $(cat "$stamp") == "$want" ]]; then
    return 0
  fi
  local t0=$SECONDS
  echo "make-roots: building Ruby $version with musl-gcc, libruby shared, into $dir (about 2 minutes, once)" >&2
  rm -rf "$dir"
  debian_source ruby3.3 "$version" trixie "$dir"
  musl_cc "$dir"
  # musl-gcc's link specification replaces gcc's, and with it the
  # --eh-frame-hdr that a native musl gcc (Alpine's) passes: without the
  # header's table the library's unwind entries cannot be looked up.
  if ! (cd "$dir" && ./configure CC="$dir/musl-cc" --enable-shared --disable-yjit --disable-install-doc \
          --without-gmp --prefix="$dir/prefix" LDFLAGS="-Wl,--eh-frame-hdr -Wl,-rpath,$dir/stripped" \
          CFLAGS="-O2 -fstack-clash-protection -Wformat -fno-omit-frame-pointer -fno-strict-aliasing" &&
        make -j"$(nproc)" ruby && make -j"$(nproc)" encs && mkdir -p stripped &&
        strip --strip-unneeded -o stripped/libruby.so.3.3 "$(readlink -f libruby.so.3.3)" &&
        strip -o ruby-stripped ruby) >>"$log" 2>&1; then
    echo "make-roots: building Ruby with musl-gcc failed; see $log" >&2
    exit 1
  fi
  echo "$want" >"$stamp"
  echo "make-roots: musl Ruby ready in $((SECONDS - t0)) s" >&2
}

build_root bullseye bullseye python3.9
build_root sid sid python3.13 python3.14 python3.15 \
  python3.13-dbg python3.14-dbg python3.15-dbg python3.13-nopie python3.14-nopie python3.15-nopie \
  libpython3.13-dev libpython3.14-dev libpython3.15-dev ruby3.3
build_free_threaded 3.13.15-1
build_musl 3.11.2-6+deb12u8
build_ruby_static 3.3.8-2
build_ruby_musl 3.3.8-2
if ((bench)); then
  build_root trixie trixie python3.13 austin
fi
