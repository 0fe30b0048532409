/* cmix.c - a test extension whose calls cross between Python and C several
 * times: c_b calls back into Python, c_d spins in C. The tests build it with
 * -O2 -fomit-frame-pointer, so that only call-frame information unwinds it.
 * Works with Python 2.7 and 3.x. */
#include <Python.h>

static volatile unsigned long sink;

/* The leaf: a loop the compiler keeps. */
__attribute__((noinline)) static unsigned long cmix_spin(unsigned long n)
{
	unsigned long x = 1;
	for (unsigned long i = 0; i < n; i++) {
		x = x * 6364136223846793005UL + i;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

/* c_d(n): spins n rounds in C. */
__attribute__((noinline)) static PyObject *c_d(PyObject *self, PyObject *arg)
{
	(void)self;
	unsigned long n = PyLong_AsUnsignedLong(arg);
	if (PyErr_Occurred())
		return NULL;
	sink += cmix_spin(n);
	Py_RETURN_NONE;
}

/* c_b(f): calls f(); the work after the call keeps it from being a tail call. */
__attribute__((noinline)) static PyObject *c_b(PyObject *self, PyObject *f)
{
	(void)self;
	PyObject *r = PyObject_CallObject(f, NULL);
	if (!r)
		return NULL;
	sink++;
	return r;
}

static PyMethodDef methods[] = {
    {"c_b", c_b, METH_O, "calls its argument"},
    {"c_d", c_d, METH_O, "spins in C"},
    {NULL, NULL, 0, NULL},
};

#if PY_MAJOR_VERSION >= 3
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cmix", NULL, -1, methods};

PyMODINIT_FUNC PyInit_cmix(void)
{
	return PyModule_Create(&module);
}
#else
PyMODINIT_FUNC initcmix(void)
{
	Py_InitModule("cmix", methods);
}
#endif
