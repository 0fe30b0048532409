/* vfork_helper.c - vfork_and_sleep(SECONDS) for tests/workloads/vfork_wait.py,
 * built by the test into a shared object that the workload loads with ctypes
 * (Python itself cannot vfork safely): the calling thread vforks, and the
 * child sleeps instead of exec'ing, so the thread waits in the kernel until
 * the child exits (wait_for_vfork_done, state D). The child dies with the
 * thread (PR_SET_PDEATHSIG). */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int vfork_and_sleep(unsigned int seconds)
{
	int status;
	pid_t pid = vfork();
	if (pid == 0) {
		/* The parent's memory and stack, borrowed: system calls only. */
		struct timespec ts = {seconds, 0};
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		nanosleep(&ts, NULL);
		_exit(0);
	}
	if (pid < 0)
		return -1;
	waitpid(pid, &status, 0);
	return 0;
}
