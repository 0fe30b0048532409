/* memread.c - process_vm_readv, which never stops or writes to the target. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "proc/memread.h"

int mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	if (!len)
		return 0;
	if (!addr || addr + len < addr)
		return -EFAULT;
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int pid_reader(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return mem_read(*(const pid_t *)ctx, addr, buf, len);
}

int mem_read_cstr(pid_t pid, uint64_t addr, char *buf, size_t max)
{
	return mem_read_cstr_with(pid_reader, &pid, addr, buf, max);
}

int mem_read_u64_with(mem_reader rd, void *ctx, uint64_t addr, uint64_t *v)
{
	int ret = rd(ctx, addr, v, sizeof(*v));
	return ret < 0 ? ret : 0;
}

int mem_read_cstr_with(mem_reader rd, void *ctx, uint64_t addr, char *buf, size_t max)
{
	if (!max)
		return -EINVAL;
	size_t got = 0;
	/* Read in small chunks that do not cross a page, so a string at the end
	 * of a mapping is still readable. */
	while (got + 1 < max) {
		uint64_t a = addr + got;
		size_t chunk = 64 - (a & 63);
		if (chunk > max - 1 - got)
			chunk = max - 1 - got;
		int err = rd(ctx, a, buf + got, chunk);
		if (err) {
			buf[got] = 0;
			return got ? (int)got : err;
		}
		void *nul = memchr(buf + got, 0, chunk);
		if (nul)
			return (int)((char *)nul - buf);
		got += chunk;
	}
	buf[got] = 0;
	return (int)got;
}
