/* budget.h - one session-wide budget for the memory taipan keeps of its
 * targets: unwind tables, native symbol indexes, code objects and their line
 * tables. Every cache takes from it before it allocates and gives back what
 * it frees, so that however the targets are built (a million symbols, one
 * line table shared by a thousand functions, thousands of libraries) what
 * taipan holds for them stays under one number, which --stats reports.
 *
 * A budget is shared by the threads of one session (the agent's reader and
 * its HTTP thread read it): the counters are atomic.
 */
#ifndef TAIPAN_BUDGET_H
#define TAIPAN_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default limit: far under the agent unit's MemoryMax (512 MiB), with
 * room for the profile and the libraries. */
#define BUDGET_DEFAULT ((size_t)256 << 20)

struct budget {
	size_t limit;	  /* 0: none */
	size_t used;	  /* held now */
	size_t peak;	  /* the most held at once */
	uint64_t refused; /* takes refused: something was not cached, or cut */
};

/* Takes n bytes if they fit under the limit: true, or false (counted in
 * refused) with nothing taken. A NULL budget takes everything. */
bool budget_take(struct budget *b, size_t n);

/* Adds n bytes however many are held already: for a cache that checks
 * budget_left() before it reads something of a bounded size, and counts
 * it once read. Accepts NULL. */
void budget_charge(struct budget *b, size_t n);

/* Gives n bytes back. Accepts NULL. */
void budget_give(struct budget *b, size_t n);

/* What is left under the limit (SIZE_MAX without one). */
size_t budget_left(const struct budget *b);

/* Counts a refusal that did not go through budget_take (a cache that cut
 * what it read to what was left). */
void budget_refused(struct budget *b);

#endif /* TAIPAN_BUDGET_H */
