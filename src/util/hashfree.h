/* hashfree.h - freeing a whole uthash table. Include it after <uthash.h>. */
#ifndef TAIPAN_HASHFREE_H
#define TAIPAN_HASHFREE_H

#include <stdlib.h>

/* Frees every entry of the uthash table head (handle hh) and the table:
 * for each entry, named e, stmt runs (to free what the entry owns), then
 * free(e). head is NULL afterwards. One pass: the table is dropped first
 * and the entries followed by their links, none deleted one by one. */
#define HASH_FREE_ALL(head, e, stmt)                                                               \
	do {                                                                                       \
		__typeof__(head) e = (head), e##_next_;                                            \
		HASH_CLEAR(hh, head);                                                              \
		for (; e; e = e##_next_) {                                                         \
			e##_next_ = e->hh.next;                                                    \
			stmt;                                                                      \
			free(e);                                                                   \
		}                                                                                  \
	} while (0)

#endif /* TAIPAN_HASHFREE_H */
