/* budget.c - the session-wide memory budget (budget.h). */
#include "util/budget.h"

static void raise_peak(struct budget *b, size_t want)
{
	/* The peak only grows: a lost race with a larger peak is no loss. */
	size_t peak = __atomic_load_n(&b->peak, __ATOMIC_RELAXED);
	while (want > peak && !__atomic_compare_exchange_n(&b->peak, &peak, want, true,
							   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

bool budget_take(struct budget *b, size_t n)
{
	size_t used, want;

	if (!b)
		return true;
	used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
	do {
		if (n > SIZE_MAX - used || (b->limit && used + n > b->limit)) {
			__atomic_add_fetch(&b->refused, 1, __ATOMIC_RELAXED);
			return false;
		}
		want = used + n;
	} while (!__atomic_compare_exchange_n(&b->used, &used, want, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	raise_peak(b, want);
	return true;
}

void budget_charge(struct budget *b, size_t n)
{
	if (b)
		raise_peak(b, __atomic_add_fetch(&b->used, n, __ATOMIC_RELAXED));
}

void budget_give(struct budget *b, size_t n)
{
	if (b)
		__atomic_sub_fetch(&b->used, n, __ATOMIC_RELAXED);
}

size_t budget_left(const struct budget *b)
{
	size_t used;

	if (!b || !b->limit)
		return SIZE_MAX;
	used = __atomic_load_n(&b->used, __ATOMIC_RELAXED);
	return used < b->limit ? b->limit - used : 0;
}

void budget_refused(struct budget *b)
{
	if (b)
		__atomic_add_fetch(&b->refused, 1, __ATOMIC_RELAXED);
}
