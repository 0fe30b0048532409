#!/bin/sh
# run.sh - runs the libFuzzer targets, or replays the regression inputs.
#
#   tests/fuzz/run.sh fuzz FUZZ_BUILD SECONDS [NAME...]   fuzz each for SECONDS
#   tests/fuzz/run.sh regress FUZZ_BUILD [NAME...]        replay tests/fuzz/regressions/NAME/*
#   tests/fuzz/run.sh check CC                            can CC build libFuzzer targets?
#
# fuzz reads and grows FUZZ_BUILD/corpus/NAME (seeded by the Makefile), prints
# the executions of each fuzzer, and leaves any crashing input in
# FUZZ_BUILD/crashes/ with the command that replays it. Exit status 1 when a
# fuzzer crashed, hung, leaked or ran out of memory.
set -u

here=$(cd "$(dirname "$0")" && pwd)
all="elf procmaps linetable debugoffsets symbolize pywalk ksyms unwtab"

# Inputs larger than taipan ever parses teach nothing; keep mutations near real sizes.
max_len() {
	case $1 in
	elf | unwtab) echo 65536 ;;
	symbolize | pywalk | ksyms) echo 16384 ;;
	debugoffsets) echo 2048 ;;
	*) echo 4096 ;;
	esac
}

case ${1:-} in
check)
	cc=$2
	tmp=$(mktemp -d) || exit 1
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$tmp/t.c"
	"$cc" -fsanitize=fuzzer,address,undefined -o "$tmp/t" "$tmp/t.c" >/dev/null 2>&1
	ok=$?
	rm -rf "$tmp"
	exit $ok
	;;
fuzz)
	build=$2
	secs=$3
	shift 3
	names=${*:-$all}
	mkdir -p "$build/crashes" "$build/logs"
	status=0
	for n in $names; do
		bin=$build/fuzz_$n
		log=$build/logs/$n.log
		mkdir -p "$build/corpus/$n"
		# -timeout: one input may take 10 s at most (a hang is a finding);
		# -rss_limit_mb: taipan must not need GiBs for one input either.
		"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
			-max_len="$(max_len "$n")" -print_final_stats=1 \
			-artifact_prefix="$build/crashes/$n-" "$build/corpus/$n" >"$log" 2>&1
		rc=$?
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
		cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
		units=$(find "$build/corpus/$n" -type f | wc -l)
		if [ $rc -ne 0 ]; then
			status=1
			echo "fuzz_$n: FAILED after ${execs:-?} executions (exit $rc); see $log"
			grep -E '^(==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)' "$log" | head -n 5
		else
			echo "fuzz_$n: ${execs:-?} executions in ${secs} s, ${cov:-cov: ?}, corpus $units inputs"
		fi
	done
	exit $status
	;;
regress)
	build=$2
	shift 2
	names=${*:-$all}
	status=0
	total=0
	for n in $names; do
		dir=$here/regressions/$n
		[ -d "$dir" ] || continue
		set -- "$dir"/*
		[ -e "$1" ] || continue
		if ! out=$("$build/fuzz_$n" -timeout=10 -rss_limit_mb=2048 "$@" 2>&1); then
			status=1
			echo "fuzz-regress: fuzz_$n FAILED on an input of $dir:"
			echo "$out" | grep -E '^(Running|==[0-9]+==ERROR|SUMMARY)' | tail -n 5
		fi
		total=$((total + $#))
	done
	echo "fuzz-regress: $total inputs replayed, $([ $status = 0 ] && echo ok || echo FAILED)"
	exit $status
	;;
*)
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
