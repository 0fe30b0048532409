# fuzz.mk - libFuzzer targets for every parser of untrusted input (tests/fuzz/).
#
# Included from the top-level Makefile.
#
#   make fuzz [FUZZ_SECONDS=60] [FUZZERS="elf pywalk"]   build, seed and run each fuzzer
#   make fuzz-regress                                   replay tests/fuzz/regressions/*/*
#                                                       (part of make test: ~5 s cold)
#
# Everything goes to $(FUZZ_BUILD) ($(BUILD)/fuzz: build/fuzz by default),
# compiled by clang with its own flags, so the normal build and its objects
# are never touched. Seed corpora are made from this machine's interpreters
# into $(FUZZ_BUILD)/corpus/NAME, which the runs then grow; none of it is
# committed. Each fuzzer's crashing inputs go to $(FUZZ_BUILD)/crashes/.

FUZZ_BUILD ?= $(BUILD)/fuzz
FUZZ_SECONDS ?= 60
FUZZ_CC ?= $(CLANG)
FUZZERS ?= elf procmaps linetable debugoffsets symbolize pywalk ksyms unwtab perfmap

FUZZ_CFLAGS = -O1 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -fno-omit-frame-pointer \
	      -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	      -Isrc -Itests/fuzz -MMD -MP
# Only the modules that parse what targets control, and what they need.
FUZZ_LIB_SRCS := $(addprefix src/proc/,elfsym.c procfs.c procmaps.c safeopen.c memread.c unwtab.c perfmap.c) \
		 $(addprefix src/cpython/,linetable.c debugoffsets.c pyproc.c pyoffsets.c pywalk.c rules.c pystr.c \
		   symbolize.c gen/debugoffsets_table.c gen/pyoffsets_table.c) \
		 $(addprefix src/ruby/,ectls.c rbproc.c rbids.c rbframes.c rboffsets.c gen/rboffsets_table.c) src/proc/mapfile.c \
		 $(addprefix src/,profile/ksyms.c profile/nativesym.c profile/debuginfod.c util/strutil.c util/log.c \
		   util/budget.c)
FUZZ_LIB_OBJS := $(patsubst src/%.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_LIB_SRCS)) \
		 $(FUZZ_BUILD)/obj/fuzz_target.o
FUZZ_ALL := elf procmaps linetable debugoffsets symbolize pywalk ksyms unwtab perfmap
FUZZ_BINS := $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_ALL))

# The interpreters whose _Py_DebugOffsets seed the fuzzers of target memory.
FUZZ_DO_ELFS := $(wildcard /root/.pyenv/versions/3.1[3-9]*/lib/libpython3.1[3-9].so.1.0 \
		   /var/cache/taipan-test/*/usr/bin/python3.1[3-9] \
		   /var/cache/taipan-test/*/usr/bin/python3.1[3-9]-pie \
		   /var/cache/taipan-test/*/usr/bin/python3.1[3-9]-dbg)

.PHONY: fuzz fuzz-build fuzz-seeds fuzz-regress
# Built by pattern rules only: keep them, or every link rebuilds them all.
.SECONDARY: $(FUZZ_LIB_OBJS)

# Coverage instrumentation for the code under test; the harnesses link libFuzzer.
$(FUZZ_BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/obj/fuzz_target.o: tests/fuzz/fuzz_target.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJS) \
		$(shell $(PKG_CONFIG) --libs libelf libdw liblzma) -lstdc++

fuzz-build:
	@if ! tests/fuzz/run.sh check $(FUZZ_CC); then \
	  echo "fuzz: $(FUZZ_CC) cannot build libFuzzer targets (clang with compiler-rt needed)" >&2; \
	  exit 1; fi
	$(MAKE) $(FUZZ_BINS)

$(FUZZ_BUILD)/corpus/stamp: tests/fuzz/make_seeds.py $(FUZZ_BINS) $(BUILD)/fixtures/stamp
	@mkdir -p $(FUZZ_BUILD)/corpus
	$(PYTHON) tests/fuzz/make_seeds.py $(FUZZ_BUILD)/corpus $(BUILD)/fixtures $(FUZZ_CC)
	for n in debugoffsets symbolize pywalk; do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n && \
	  TAIPAN_FUZZ_SEEDS=$(FUZZ_BUILD)/corpus/$$n $(FUZZ_BUILD)/fuzz_$$n $(FUZZ_DO_ELFS) \
	    || exit 1; \
	done
	touch $@

fuzz-seeds: fuzz-build
	$(MAKE) $(FUZZ_BUILD)/corpus/stamp

# Skipped with the reason when clang cannot build fuzzers, except under CI=true.
fuzz:
	@if ! tests/fuzz/run.sh check $(FUZZ_CC); then \
	  if [ "$$CI" = true ]; then \
	    echo "fuzz: ERROR: CI=true and $(FUZZ_CC) cannot build libFuzzer targets" >&2; exit 1; fi; \
	  echo "fuzz: skipped: $(FUZZ_CC) cannot build libFuzzer targets (clang with compiler-rt needed)"; \
	  exit 0; fi; \
	$(MAKE) fuzz-seeds && tests/fuzz/run.sh fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZERS)

fuzz-regress:
	@if ! tests/fuzz/run.sh check $(FUZZ_CC); then \
	  if [ "$$CI" = true ]; then \
	    echo "fuzz-regress: ERROR: CI=true and $(FUZZ_CC) cannot build libFuzzer targets" >&2; \
	    exit 1; fi; \
	  echo "fuzz-regress: skipped: $(FUZZ_CC) cannot build libFuzzer targets"; exit 0; fi; \
	$(MAKE) $(FUZZ_BINS) && tests/fuzz/run.sh regress $(FUZZ_BUILD)

-include $(wildcard $(FUZZ_BUILD)/obj/*.d $(FUZZ_BUILD)/obj/*/*.d $(FUZZ_BUILD)/obj/*/*/*.d $(FUZZ_BUILD)/*.d)
