# fixtures.mk - line-table fixtures and memory captures recorded from every
# installed Python, for test_linetable and test_captures.
#
# Included from the top-level Makefile. The unit tests read them from
# $(BUILD)/fixtures (env TAIPAN_FIXTURES); the stamp is redone when the
# generator or an interpreter changes.

FIXTURE_PYTHONS := $(wildcard /root/.pyenv/versions/*/bin/python /usr/bin/python3.11 \
			      /var/cache/taipan-test/*/usr/bin/python3.1[3-9])

$(BUILD)/fixtures/stamp: tests/fixtures/gen_fixtures.sh tests/fixtures/dump_linetables.py \
			 tests/fixtures/capture_workload.py $(BUILD)/tools/taipan-capture \
			 $(FIXTURE_PYTHONS)
	TAIPAN_CAPTURE=$(abspath $(BUILD)/tools/taipan-capture) \
		tests/fixtures/gen_fixtures.sh $(BUILD)/fixtures
	touch $@
