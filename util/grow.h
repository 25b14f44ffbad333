/*
 * grow.h - room for more elements in an array kept with realloc().
 *
 * The one growth rule of the project: the capacity doubles (from a first
 * capacity the caller picks) until it holds what is needed, so n appends cost
 * O(n) copies in all.  On failure the array and its capacity are unchanged.
 *
 *     struct item *v = NULL;
 *     size_t n = 0, cap = 0;
 *     if (MW_GROW(v, cap, n + 1, 64))
 *             return -ENOMEM;
 *     v[n++] = it;
 */
#ifndef MEMWALFS_GROW_H
#define MEMWALFS_GROW_H

#include <stddef.h>

/*
 * Make *arrp (a pointer to the array's pointer, of any object type) hold at
 * least need elements of elem bytes; *cap is its capacity in elements, first
 * the capacity of a NULL array.  0, or -ENOMEM (also on size overflow).
 */
int mw_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

/* mw_grow() of array arr (an lvalue pointer) with capacity lvalue cap. */
#define MW_GROW(arr, cap, need, first) mw_grow(&(arr), &(cap), (need), sizeof(*(arr)), (first))

#endif
