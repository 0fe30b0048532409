/* lost.c - code that loses the native walk, for native_lost.py: each
 * function calls a callback (a Python function through ctypes, which never
 * returns) in a way no unwinder can follow past. Built by the tests
 * (test_native.py). Written in assembly, so that the compiler adds no CFI.
 *
 *   lost_nowhere(cb)  calls cb with 0x10000 as its return address, an
 *                     address no mapping holds;
 *   lost_nofp(cb)     calls cb from code without CFI that put a bogus value
 *                     in rbp, as hand-written assembly (BLAS kernels) may. */
__asm__(".text\n"
	".globl lost_nowhere\n"
	".type lost_nowhere, @function\n"
	"lost_nowhere:\n"
	"	push $0x10000\n"
	"	push $0x10000\n"
	"	jmp *%rdi\n"
	".size lost_nowhere, .-lost_nowhere\n"
	".globl lost_nofp\n"
	".type lost_nofp, @function\n"
	"lost_nofp:\n"
	"	push %rbp\n"
	"	mov $0x20, %rbp\n"
	"	call *%rdi\n"
	"	pop %rbp\n"
	"	ret\n"
	".size lost_nofp, .-lost_nofp\n");

/* A function with CFI after them, so that they lie in a gap between FDEs. */
int lost_anchor(int x)
{
	return x + 1;
}
