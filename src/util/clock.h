/* clock.h - the time, as every part of taipan reads it. */
#ifndef TAIPAN_CLOCK_H
#define TAIPAN_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on clock c; CLOCK_MONOTONIC is the one the BPF events'
 * time_ns (bpf_ktime_get_ns) counts on. */
static inline uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Seconds on the monotonic clock: for durations, deadlines and rates. */
static inline double mono_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* TAIPAN_CLOCK_H */
