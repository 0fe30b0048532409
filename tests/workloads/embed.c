/* embed.c - a C program that embeds libpython and runs a script in it:
 * taipan must find the interpreter in the library, not the executable.
 * Usage: embedder SCRIPT [ARGS...] */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SCRIPT [ARGS...]\n", argv[0]);
		return 2;
	}
	Py_Initialize();
	wchar_t **wargv = PyMem_RawCalloc((size_t)argc, sizeof(*wargv));
	for (int i = 1; i < argc; i++)
		wargv[i - 1] = Py_DecodeLocale(argv[i], NULL);
	PySys_SetArgvEx(argc - 1, wargv, 0);
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	int ret = PyRun_SimpleFileEx(f, argv[1], 1);
	Py_Finalize();
	return ret ? 1 : 0;
}
