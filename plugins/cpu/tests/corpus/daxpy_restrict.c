#include <stddef.h>

/* y := a*x + y on doubles, C99 restrict pointers and a size_t count, as numerical codes write it */
void daxpy(size_t n, double a, const double *restrict x, double *restrict y)
{
    for (size_t i = 0; i < n; ++i)
        y[i] = a * x[i] + y[i];
}
