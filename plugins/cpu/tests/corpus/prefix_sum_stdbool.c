#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* Prefix sum of 32-bit ints into 64-bit totals; `inclusive` chooses the scan kind */
void prefix_sum(const int32_t *in, int64_t *out, size_t n, bool inclusive)
{
    int64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        if (inclusive) {
            acc += in[i];
            out[i] = acc;
        } else {
            out[i] = acc;
            acc += in[i];
        }
    }
}
