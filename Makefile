# taipan - build, test, install.
#
#   make            build build/taipan
#   make run        install missing packages, build, profile the built-in demo
#   make check      install missing packages, build, run every test (what CI runs)
#   make quick      the fast lane: lint, build, unit tests; no root, network or apt
#   make SAN=1 ...  the same with AddressSanitizer + UndefinedBehaviorSanitizer (build/san)
#   make san-select which functional tests the sanitizer pass runs (by coverage)
#   make test-lsan  the unit and functional tests under LeakSanitizer (build/lsan)
#   make fuzz       libFuzzer over every parser of untrusted input (tests/fuzz/fuzz.mk)
#   make vmlinux    regenerate the vendored src/bpf/vmlinux/x86/vmlinux.h from this kernel
#   make install    bin/taipan, share/man/man1/taipan.1 and the agent's systemd unit under
#                   PREFIX (/usr/local); DESTDIR and MANDIR honoured
#   make uninstall  removes exactly those files (same PREFIX, DESTDIR, MANDIR)

CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
PROTOC_C ?= protoc-c
PYTHON ?= /usr/bin/python3
PKG_CONFIG ?= pkg-config
PREFIX ?= /usr/local

SAN ?=
ifeq ($(SAN),1)
BUILD ?= build/san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SAN),lsan)
# LeakSanitizer alone: every leak fails the run that exits with it.
BUILD ?= build/lsan
SANFLAGS = -fsanitize=leak -fno-omit-frame-pointer
else ifeq ($(SAN),cov)
# gcov: the lines each functional test reaches (make san-select).
BUILD ?= build/cov
SANFLAGS = --coverage
else
BUILD ?= build
SANFLAGS =
endif
GEN := build/gen

CFLAGS ?= -O2 -g
# Hardening, for a root daemon that parses memory its targets control: stack
# canaries, and glibc's checked string and memory calls where sizes are known.
# FORTIFY needs optimization (it warns, so fails -Werror, without it); the
# -U first keeps a toolchain that defines it already from warning too.
HARDEN = -fstack-protector-strong
ifneq ($(filter -O -O1 -O2 -O3 -Os -Og -Ofast,$(CFLAGS)),)
HARDEN += -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2
endif
# The libraries' flags come from pkg-config (uthash is headers only). Errors
# are kept quiet here, where make deps must still run on a machine that
# lacks the packages; pkg-check says what is missing before a compile.
# libmicrohttpd and libcurl (the agent's server and pushes) give headers only:
# they are opened when the agent needs them (src/util/dynlib.h), by the
# soname of the library the headers came with.
PKGS := libbpf libelf libdw zlib liblzma libprotobuf-c jansson ncursesw
PKGS_OPENED := libmicrohttpd libcurl
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) $(PKGS_OPENED) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
soname = $(shell objdump -p $$($(PKG_CONFIG) --variable=libdir $(1) 2>/dev/null)/$(2).so \
	2>/dev/null | awk '$$1 == "SONAME" {print $$2}')
CURL_SONAME := $(call soname,libcurl,libcurl)
MHD_SONAME := $(call soname,libmicrohttpd,libmicrohttpd)
PKG_CFLAGS += $(if $(CURL_SONAME),-DCURL_SONAME='"$(CURL_SONAME)"') \
	      $(if $(MHD_SONAME),-DMHD_SONAME='"$(MHD_SONAME)"')
CMOCKA_CFLAGS := $(shell $(PKG_CONFIG) --cflags cmocka 2>/dev/null)
CMOCKA_LIBS := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE $(HARDEN) $(SANFLAGS) \
	  -Isrc -I$(GEN) $(PKG_CFLAGS) -MMD -MP
# libstdc++ for __cxa_demangle alone (C++ names of native frames).
LDLIBS += $(PKG_LIBS) -lstdc++ -lpthread
LDFLAGS += $(SANFLAGS)

# The kernel's types come from a vendored vmlinux.h (src/bpf/vmlinux/), not
# from the build host's kernel: CO-RE relocates them against the running
# kernel at load time, so building needs no /sys/kernel/btf.
BPF_ARCH = x86
VMLINUX_H = src/bpf/vmlinux/$(BPF_ARCH)/vmlinux.h
BPF_CFLAGS = -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -D__BPF__ -Isrc \
	     -I$(dir $(VMLINUX_H)) -I$(GEN) -Wall -Werror

# src/ by stage: proc/ (processes and their files, whatever they run),
# cpython/ (the CPython wing), core/ (the sampler and the session), profile/,
# output/, agent/, cmd/ (the commands), util/.
LIB_SRCS := $(filter-out src/cmd/main.c src/bpf/%,$(wildcard src/*/*.c src/*/gen/*.c))
# OpenTelemetry's profiles protocol (src/output/opentelemetry/, vendored):
# the export request and what it imports, generated as profile.proto is.
OTLP_PROTOS := common/v1/common resource/v1/resource profiles/v1development/profiles \
	       collector/profiles/v1development/profiles_service
OTLP_PB_C := $(patsubst %,$(GEN)/opentelemetry/proto/%.pb-c.c,$(OTLP_PROTOS))
OTLP_PB_H := $(OTLP_PB_C:.c=.h)
PB_OBJS := $(BUILD)/obj/profile.pb-c.o \
	   $(patsubst $(GEN)/%.pb-c.c,$(BUILD)/obj/%.pb-c.o,$(OTLP_PB_C))
LIB_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS)) $(PB_OBJS)
# The flame-graph page (src/output/html/), compiled in as byte arrays.
HTML_ASSETS := src/output/html/flamegraph.html src/output/html/flamegraph.css src/output/html/flamegraph.js
LIB_OBJS += $(BUILD)/obj/html_assets.o
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

.PHONY: all quick deps roots run check test unit functional test-san test-lsan test-load san-select lint format clean install cfi-rules \
	uninstall offsets demo bench bench-unwtab pkg-check vmlinux
.DELETE_ON_ERROR:

all: $(BUILD)/taipan

# --- generated headers ---------------------------------------------------------
# Regenerates the vendored vmlinux.h from this machine's kernel (committed;
# see src/bpf/vmlinux/README). Not part of any build.
vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $(VMLINUX_H).tmp && \
	  mv $(VMLINUX_H).tmp $(VMLINUX_H)

$(GEN)/profile.pb-c.c $(GEN)/profile.pb-c.h: src/output/profile.proto
	@mkdir -p $(GEN)
	cd src/output && $(PROTOC_C) --c_out=../../$(GEN) profile.proto

# One run for all of them: protoc-c names each output after its input's path.
$(OTLP_PB_C) $(OTLP_PB_H) &: $(patsubst %,src/output/opentelemetry/proto/%.proto,$(OTLP_PROTOS))
	@mkdir -p $(GEN)
	cd src/output && $(PROTOC_C) --c_out=../../$(GEN) \
	  $(patsubst %,opentelemetry/proto/%.proto,$(OTLP_PROTOS))

# Every header may reach BPF: a runtime's wing holds its ABI and its BPF unit.
$(GEN)/taipan.bpf.o: src/bpf/taipan.bpf.c $(wildcard src/*.h src/*/*.h) \
		    $(VMLINUX_H)
	@mkdir -p $(GEN)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(GEN)/taipan.skel.h: $(GEN)/taipan.bpf.o
	$(BPFTOOL) gen skeleton $< name taipan_bpf > $@.tmp && mv $@.tmp $@

# The page's parts as C arrays for out_html.c. The style and script are
# pasted inside <style> and <script> elements, which a "</style" or
# "</script" in them would end early: refused here.
$(GEN)/html_assets.c: $(HTML_ASSETS)
	@mkdir -p $(GEN)
	@if grep -qi '</script' src/output/html/flamegraph.js || grep -qi '</style' src/output/html/flamegraph.css; \
	then echo "src/output/html: a </script or </style inside the inlined parts" >&2; exit 1; fi
	{ echo '/* generated from src/output/html/ by the Makefile; do not edit */'; \
	  echo '#include <stddef.h>'; \
	  for part in page:flamegraph.html css:flamegraph.css js:flamegraph.js; do \
	    name=taipan_html_$${part%%:*}; \
	    echo "const unsigned char $$name[] = {"; \
	    xxd -i < src/output/html/$${part#*:}; \
	    echo "};"; \
	    echo "const size_t $${name}_len = sizeof($$name);"; \
	  done; } > $@.$$$$.tmp && mv $@.$$$$.tmp $@

# --- user space -----------------------------------------------------------------
# Names the libraries pkg-config does not know, rather than letting the
# compiler fail on a missing header.
pkg-check:
	@$(PKG_CONFIG) --exists --print-errors $(PKGS) $(PKGS_OPENED) || \
	  { echo "missing libraries: make deps installs them" >&2; exit 1; }

$(BUILD)/obj/profile.pb-c.o: $(GEN)/profile.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

$(BUILD)/obj/opentelemetry/%.pb-c.o: $(GEN)/opentelemetry/%.pb-c.c $(OTLP_PB_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-unused-parameter -c $< -o $@

$(BUILD)/obj/%.o: src/%.c | $(GEN)/profile.pb-c.h $(OTLP_PB_H) pkg-check
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/html_assets.o: $(GEN)/html_assets.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Only the loader includes the BPF skeleton.
$(BUILD)/obj/core/bpfrun.o: $(GEN)/taipan.skel.h

$(BUILD)/libtaipan.a: $(LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/taipan: $(BUILD)/obj/cmd/main.o $(BUILD)/libtaipan.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# --- tests ----------------------------------------------------------------------
$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS) \
		$(CMOCKA_LIBS)

# Tools that work beside taipan: taipan-capture writes the captured-memory
# fixtures of tests/unit/test_captures.c.
$(BUILD)/tools/taipan-capture: tools/capture.c $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS)

# taipan-nsym names addresses of ELF files as native frames are named, and
# times it (doc/BENCHMARKS.md).
$(BUILD)/tools/taipan-nsym: tools/nsym.c $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS)

# taipan-cfirules prints ELF files' unwind rows by rule kind, and those the
# native unwinder cannot follow (make cfi-rules).
$(BUILD)/tools/taipan-cfirules: tools/cfirules.c $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS)

# taipan-rbec says where a Ruby library keeps each thread's execution
# context, and reads a live thread's (tests/functional/test_ruby.py).
$(BUILD)/tools/taipan-rbec: tools/rbec.c $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS)

unit: $(UNIT_BINS) $(BUILD)/fixtures/stamp
	TAIPAN_FIXTURES=$(abspath $(BUILD)/fixtures) TAIPAN_ROOTS=$(TEST_ROOTS) $(PYTHON) tests/run_unit.py $(UNIT_BINS)

# test_html.py writes its 100,000-stack page with the unit-test binary.
# Under the sanitizers (SAN=1), TAIPAN_SANITIZED=1 runs the tests that repeat
# over every interpreter of the matrix over a few of each kind instead
# (conftest.py's matrix_sample): the sanitizers check taipan's memory, which
# those few exercise along every code path, at a fraction of the time.
functional: $(BUILD)/taipan $(BUILD)/tests/test_output_html $(BUILD)/tools/taipan-rbec
	TAIPAN=$(abspath $(BUILD)/taipan) TAIPAN_TOOLS=$(abspath $(BUILD)/tools) TAIPAN_SANITIZED=$(if $(filter 1 lsan,$(SAN)),1,) \
		$(PYTHON) -m pytest -q -ra --durations=30 tests/functional

# The fast lane, for every edit: nothing installed, no root (the unit tests
# that load BPF skip without it), no network, no test roots.
quick:
	$(MAKE) lint
	$(MAKE) all
	$(MAKE) unit

test: roots
	$(MAKE) unit
	$(MAKE) fuzz-regress
	$(MAKE) functional

# Debian roots with the other Pythons of the test matrix (cached outside the clone).
roots:
	@scripts/make-roots.sh

# CI's command (.ci/run): the functional suite twice, once under load (every
# core kept busy, as a profiler's host often is) and once under the
# sanitizers (on a quiet machine: under load they would take twice as long).
# The sanitizer pass runs the functional tests of tests/functional/san-tests.txt
# (make san-select): those that reach code the loaded pass's others do not.
# Each pass's time is printed at the end (scripts/pass.sh).
check: deps
	@rm -f build/passes.txt
	@scripts/pass.sh build $(MAKE) all
	@scripts/pass.sh roots $(MAKE) roots
	@scripts/pass.sh unit $(MAKE) unit
	@scripts/pass.sh fuzz-regress $(MAKE) fuzz-regress
	@scripts/pass.sh loaded $(MAKE) test-load
	@scripts/pass.sh san-build $(MAKE) SAN=1 all
	@scripts/pass.sh san $(MAKE) SAN=1 test
	@echo "== make check passes:" && cat build/passes.txt

test-san:
	$(MAKE) SAN=1 all
	$(MAKE) SAN=1 test

# The functional suite while stress-ng keeps every core busy: the tests wait
# on conditions and size their work by what they measure, so they must pass
# on a loaded host too. Part of check, in place of a quiet pass: the suite
# takes about 28 minutes so, against 25 on a quiet machine.
test-load: roots all $(BUILD)/tests/test_output_html
	scripts/with-load.sh $(MAKE) functional

# The functional tests the sanitizer pass runs (tests/functional/san-tests.txt):
# the whole suite once with gcov (build/cov), each test's lines of src/, and
# the fewest tests that reach them all (scripts/san-select.py). Run it again
# when tests or code move a lot; a test the list does not name runs anyway.
san-select: roots
	$(MAKE) SAN=cov all
	rm -rf build/cov/runs build/cov/junit.xml
	-TAIPAN_COVERAGE=$(abspath build/cov/runs) PYTEST_ADDOPTS=--junitxml=$(abspath build/cov/junit.xml) \
		$(MAKE) SAN=cov functional
	$(PYTHON) scripts/san-select.py --runs build/cov/runs --build build/cov \
		--junit build/cov/junit.xml > tests/functional/san-tests.txt.new
	mv tests/functional/san-tests.txt.new tests/functional/san-tests.txt

# The unit and functional suites under LeakSanitizer alone (build/lsan).
test-lsan:
	$(MAKE) SAN=lsan all
	$(MAKE) SAN=lsan test

deps:
	@scripts/install-deps.sh

run: deps
	$(MAKE) all
	@scripts/demo.sh $(TARGET)

demo: run

# Figures, not tests: per-sample BPF cost and slowdown (overhead.py); taipan
# against Austin and CPython's sampler (compare.py), written to bench/results/;
# native frames: across the matrix (native.py), BPF time per native frame
# (native_depth.py), BPF time per Ruby sample by depth beside Python's
# (ruby_depth.py), the slowdown of Python + C work against the floor of
# an empty BPF program (slowdown.py), samples lost while torch is imported
# on a busy machine (torch_import.py).
bench: $(BUILD)/taipan bench-unwtab $(BUILD)/bench/ingest
	@scripts/make-roots.sh --bench
	$(PYTHON) bench/overhead.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/startup.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/compare.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/overhead.py --native --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/native.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/native_depth.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/ruby_depth.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/async_cost.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/slowdown.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/torch_import.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/ingest.py --ingest $(abspath $(BUILD)/bench/ingest) --python $(UNWTAB_PY)
	$(PYTHON) bench/switch.py --taipan $(abspath $(BUILD)/taipan)
	$(PYTHON) bench/attacks.py --taipan $(abspath $(BUILD)/taipan)

# Native unwind tables (bench/unwtab.c): rows, bytes and build time for
# libpython3.12, libc, ld.so, libm and ten extension modules, then for every
# file a running python3.12 maps.
UNWTAB_PY := $(firstword $(wildcard /root/.pyenv/versions/3.12*/bin/python3.12))
UNWTAB_MODS := _decimal _pickle _datetime _json _socket _ssl _ctypes zlib math array
UNWTAB_FILES = $(wildcard $(UNWTAB_PY:bin/python3.12=lib/libpython3.12.so.1.0)) \
	/usr/lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 \
	/usr/lib/x86_64-linux-gnu/libm.so.6 \
	$(foreach m,$(UNWTAB_MODS),$(wildcard $(UNWTAB_PY:bin/python3.12=lib/python3.12/lib-dynload/$(m).cpython-312-*.so)))

$(BUILD)/bench/unwtab: bench/unwtab.c $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS)

$(BUILD)/bench/ingest: bench/ingest.c $(BUILD)/libtaipan.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libtaipan.a $(LDLIBS)

bench-unwtab: $(BUILD)/bench/unwtab
	@if [ -z "$(UNWTAB_PY)" ]; then echo "bench-unwtab: no pyenv python3.12" >&2; exit 1; fi
	$(BUILD)/bench/unwtab $(UNWTAB_FILES)
	$(BUILD)/bench/unwtab --python $(UNWTAB_PY)

# Native unwind rows by rule kind, and those taipan cannot follow, for the
# libraries of real workloads (PyTorch, OpenBLAS, numpy, the C and C++
# runtimes) and the interpreters of the test matrix: make cfi-rules
# [CFI_FILES=...]. Files missing here are left out.
LIBDIR := /usr/lib/x86_64-linux-gnu
TEST_ROOTS ?= /var/cache/taipan-test
CFI_FILES ?= $(wildcard $(LIBDIR)/libtorch_cpu.so.* $(LIBDIR)/libc10.so.* $(LIBDIR)/libtorch_python.so.*) \
	$(wildcard $(LIBDIR)/openblas-pthread/libopenblasp-*.so) \
	$(wildcard /usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.*.so) \
	$(wildcard $(LIBDIR)/libstdc++.so.6 $(LIBDIR)/libc.so.6 $(LIBDIR)/libm.so.6) \
	$(wildcard /root/.pyenv/versions/*/lib/libpython*.so.1.0 /usr/bin/python3.11) \
	$(wildcard $(TEST_ROOTS)/*/usr/bin/python3.[0-9] $(TEST_ROOTS)/*/usr/bin/python3.[0-9][0-9] \
		$(TEST_ROOTS)/*/usr/bin/python3.[0-9][0-9]t)

cfi-rules: $(BUILD)/tools/taipan-cfirules
	$(BUILD)/tools/taipan-cfirules $(sort $(realpath $(CFI_FILES)))

# Regenerate the offset tables from the DWARF of the pyenv interpreters.
offsets:
	$(PYTHON) tools/gen_offsets.py --all

lint:
	clang-format --dry-run --Werror src/*.h src/*/*.c src/*/*.h src/*/gen/*.c tools/*.c tests/unit/*.c \
		tests/fuzz/*.c tests/fuzz/*.h

format:
	clang-format -i src/*.h src/*/*.c src/*/*.h src/*/gen/*.c tools/*.c bench/*.c tests/unit/*.c tests/fuzz/*.c tests/fuzz/*.h

MANDIR ?= $(PREFIX)/share/man
# What install puts in place, and so exactly what uninstall removes. The
# unit's ExecStart names the binary under PREFIX, whatever PREFIX is.
INSTALLED_BIN = $(DESTDIR)$(PREFIX)/bin/taipan
INSTALLED_MAN = $(DESTDIR)$(MANDIR)/man1/taipan.1
INSTALLED_UNIT = $(DESTDIR)$(PREFIX)/lib/systemd/system/taipan-agent.service

install: $(BUILD)/taipan
	install -D -m 0755 $(BUILD)/taipan $(INSTALLED_BIN)
	install -D -m 0644 doc/taipan.1 $(INSTALLED_MAN)
	@mkdir -p $(dir $(INSTALLED_UNIT))
	sed 's|/usr/local/bin/taipan|$(PREFIX)/bin/taipan|g' dist/taipan-agent.service > $(INSTALLED_UNIT).tmp
	chmod 0644 $(INSTALLED_UNIT).tmp && mv $(INSTALLED_UNIT).tmp $(INSTALLED_UNIT)

# The files only: the directories may hold other things.
uninstall:
	rm -f $(INSTALLED_BIN) $(INSTALLED_MAN) $(INSTALLED_UNIT)

clean:
	rm -rf build

include tests/unit/fixtures.mk
include tests/fuzz/fuzz.mk
-include $(wildcard $(BUILD)/obj/*.d $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d $(BUILD)/tests/*.d \
	$(BUILD)/tools/*.d)
