/* dynlib.h - libraries opened when first needed (dlopen), not at start.
 *
 * libcurl (the agent's pushes) and libmicrohttpd (its HTTP server) bring 30
 * more shared libraries with them (TLS, Kerberos, LDAP, ...): loaded at
 * every start, they cost each `taipan record` and `taipan dump` about 4 ms
 * of CPU for code only the agent runs. Their headers still give the types
 * and the constants; the functions come through a table.
 *
 * A module lists its functions once, as X(prefix_, name) entries of a
 * macro LIST, and declares the table with DYNLIB_TABLE(var, LIST): var, a
 * struct holding one pointer a function, each of that function's own type
 * (called as var.name(...)), and var_names, the symbols to look up.
 * DYNLIB_OPEN(var, soname, err, errlen) fills it. */
#ifndef TAIPAN_DYNLIB_H
#define TAIPAN_DYNLIB_H

#include <stddef.h>

#define DYNLIB_FIELD_(prefix, name) __typeof__(prefix##name) *name;
#define DYNLIB_NAME_(prefix, name) #prefix #name,

#define DYNLIB_TABLE(var, LIST)                                                                    \
	static struct {                                                                            \
		LIST(DYNLIB_FIELD_)                                                                \
	} var;                                                                                     \
	static const char *const var##_names[] = {LIST(DYNLIB_NAME_)};                             \
	_Static_assert(sizeof(var) ==                                                              \
			   sizeof(var##_names) / sizeof(var##_names[0]) * sizeof(void (*)(void)),  \
		       "one pointer a name")

#define DYNLIB_OPEN(var, soname, err, errlen)                                                      \
	dynlib_open(soname, var##_names, sizeof(var##_names) / sizeof(var##_names[0]),             \
		    (void (**)(void)) & var, err, errlen)

/* Opens soname once (later calls return what the first one did) and
 * resolves names[0 .. n) into fns[0 .. n). 0, or -ENOENT with a one-line
 * message naming the library in err. Thread-safe. */
int dynlib_open(const char *soname, const char *const *names, size_t n, void (**fns)(void),
		char *err, size_t errlen);

#endif /* TAIPAN_DYNLIB_H */
