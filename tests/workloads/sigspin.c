/* sigspin.c - C code that a signal interrupts, for native_signal.py: a C
 * handler for SIGALRM that calls back into Python (a ctypes callback), and
 * a loop that spins in C until the process is killed. Built by the tests
 * (test_native.py), -O2 without frame pointers. */
#include <signal.h>
#include <string.h>

static void (*callback)(int);
static volatile int handled;

static void on_signal(int sig)
{
	callback(sig);
	handled++; /* after the call: no tail call, the handler keeps its frame */
}

int sigspin_install(void (*cb)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	callback = cb;
	return sigaction(SIGALRM, &sa, NULL);
}

void sigspin_loop(void)
{
	volatile unsigned long x = 0;
	for (;;)
		x++;
}
