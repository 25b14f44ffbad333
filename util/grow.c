/* grow.c - see grow.h. */
#include "grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int mw_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : first ? first : 1;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return -ENOMEM;
		nc *= 2;
	}
	if (elem && nc > SIZE_MAX / elem)
		return -ENOMEM;
	void *old, *p;
	memcpy(&old, arrp, sizeof(old)); /* *arrp is a pointer of some object type */
	p = realloc(old, nc * elem);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = nc;
	return 0;
}
