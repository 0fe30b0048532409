# fixtures.mk - line-table fixtures and memory captures recorded from every
# installed Python, for test_linetable and test_captures.
#
# Included from the top-level Makefile. The unit tests read them from
# $(BUILD)/fixtures (env TAIPAN_FIXTURES); the stamp is redone when the
# generator or an interpreter changes.

FIXTURE_PYTHONS := $(wildcard /root/.pyenv/versions/*/bin/python /usr/bin/python3.11 \
			      /var/cache/taipan-test/*/usr/bin/python3.1[3-9])

$(BUILD)/fixtures/stamp: tests/fixtures/gen_fixtures.sh tests/fixtures/dump_linetables.py \
			 tests/fixtures/capture_workload.py tests/fixtures/synth_code.py \
			 tests/fixtures/synth_image.c $(BUILD)/tools/taipan-capture \
			 $(FIXTURE_PYTHONS)
	TAIPAN_CAPTURE=$(abspath $(BUILD)/tools/taipan-capture) \
		tests/fixtures/gen_fixtures.sh $(BUILD)/fixtures
	touch $@

# Small libraries for test_unwtab: mixed.so has eh.c's CFI in .eh_frame and
# dbg.c's only in .debug_frame (-g, no unwind tables); nocfi.so has none.
# realign.so has the CFI of realigned stacks (CFA on r10 or r13, then
# *(rbp - N), rbp saved at rbp + 0) and of a stack-clash probe loop (CFA on
# r11).
UNWTAB_FIXTURES := $(BUILD)/fixtures/unwtab/mixed.so $(BUILD)/fixtures/unwtab/nocfi.so \
	$(BUILD)/fixtures/unwtab/realign.so
UNWTAB_FIX_CC = $(CC) -O1 -fPIC -fno-omit-frame-pointer -fcf-protection=none

unit: $(UNWTAB_FIXTURES)

$(BUILD)/fixtures/unwtab/mixed.so: tests/fixtures/unwtab/eh.c tests/fixtures/unwtab/dbg.c
	@mkdir -p $(dir $@)
	$(UNWTAB_FIX_CC) -fasynchronous-unwind-tables -c tests/fixtures/unwtab/eh.c -o $@.eh.o
	$(UNWTAB_FIX_CC) -g -fno-asynchronous-unwind-tables -fno-unwind-tables \
		-c tests/fixtures/unwtab/dbg.c -o $@.dbg.o
	$(CC) -shared -nostdlib -Wl,-z,max-page-size=4096 -o $@ $@.eh.o $@.dbg.o

$(BUILD)/fixtures/unwtab/realign.so: tests/workloads/realign.c tests/fixtures/unwtab/drap13.S
	@mkdir -p $(dir $@)
	gcc -O2 -fPIC -shared -fomit-frame-pointer -fstack-clash-protection -o $@ $^

$(BUILD)/fixtures/unwtab/nocfi.so: tests/fixtures/unwtab/dbg.c
	@mkdir -p $(dir $@)
	$(UNWTAB_FIX_CC) -fno-asynchronous-unwind-tables -fno-unwind-tables -c $< -o $@.o
	$(CC) -shared -nostdlib -o $@ $@.o
