// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* ksym.bpf.h - names kernel addresses for user space (struct tp_ksym_req):
 * run on demand through BPF_PROG_TEST_RUN, never attached. The kernel's
 * symbol lookup costs about a microsecond an address, where reading
 * /proc/kallsyms whole costs tens of milliseconds of CPU at start-up
 * (doc/BENCHMARKS.md). Loaded only where the kernel has syscall programs and
 * bpf_snprintf (5.14).
 */
#ifndef TAIPAN_BPF_KSYM_BPF_H
#define TAIPAN_BPF_KSYM_BPF_H

struct tp_ksym_req ksym_req;

SEC("syscall")
int ksym_names(void *ctx)
{
	for (__u32 i = 0; i < TP_KSYM_BATCH; i++) {
		if (i >= ksym_req.n)
			break;
		__u64 addr = ksym_req.addr[i];
		if (bpf_snprintf(ksym_req.name[i], TP_KSYM_LEN, "%ps", &addr, sizeof(addr)) < 0)
			ksym_req.name[i][0] = '\0';
	}
	return 0;
}

#endif /* TAIPAN_BPF_KSYM_BPF_H */
