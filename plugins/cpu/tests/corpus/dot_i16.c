#include <stdint.h>

/* Dot product of int16 vectors accumulated in int64, a count of uint32 */
void dot_i16(const int16_t *a, const int16_t *b, uint32_t n, int64_t *out)
{
    int64_t acc = 0;
    for (uint32_t i = 0; i < n; i++)
        acc += (int64_t)a[i] * b[i];
    out[0] = acc;
}
