#include <stddef.h>

/* Kahan (compensated) summation: the running error is fed back into every addition. */
void kahan_sum(const double *input, size_t n, double *result)
{
    double sum = 0.0;
    double c = 0.0;                 /* a running compensation for lost low-order bits */
    for (size_t i = 0; i < n; i++) {
        double y = input[i] - c;
        double t = sum + y;
        c = (t - sum) - y;
        sum = t;
    }
    *result = sum;
}
