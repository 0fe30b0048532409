/* realign.c - code whose call-frame information needs the rules of
 * realigned stacks and stack-clash probes (tests/functional/test_native.py):
 *
 * realign_call() keeps a variable-length array and a 64-byte-aligned one,
 * so GCC realigns its stack through a DRAP register: its CFA is r10 in the
 * prologue, then *(rbp - N), and its rbp is saved at rbp + 0 (CFI
 * expressions). It calls cb from the realigned frame.
 *
 * probe_spin() calls big_frame() for ms milliseconds; built with
 * -fstack-clash-protection, big_frame() probes its 1 MiB frame page by page
 * in a loop whose CFA is r11. */
#include <string.h>
#include <time.h>

typedef void (*realign_cb)(int);

__attribute__((noinline)) int realign_call(int n, realign_cb cb)
{
	char vla[n];
	char aligned[256] __attribute__((aligned(64)));

	memset(vla, n, n);
	memset(aligned, n, sizeof(aligned));
	__asm__ volatile("" : : "r"(vla), "r"(aligned) : "memory");
	cb(n);
	return vla[0] + aligned[n % sizeof(aligned)];
}

__attribute__((noinline)) int big_frame(int k)
{
	volatile char buf[1 << 20];

	buf[k & 0xfffff] = (char)k;
	return buf[(k * 7) & 0xfffff];
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int probe_spin(unsigned int ms)
{
	double end = now() + ms / 1e3;
	int sum = 0;

	while (now() < end)
		for (int i = 0; i < 64; i++)
			sum += big_frame(i);
	return sum;
}
