#include <float.h>
#include <math.h>
#include <stddef.h>

/* Row-wise softmax with the usual max subtraction; FLT_MAX from <float.h> */
void softmax_rows(float *restrict out, const float *restrict in, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) {
        const float *x = in + r * cols;
        float *y = out + r * cols;
        float m = -FLT_MAX;
        for (size_t c = 0; c < cols; c++)
            m = x[c] > m ? x[c] : m;
        float s = 0.0f;
        for (size_t c = 0; c < cols; c++) {
            y[c] = expf(x[c] - m);
            s += y[c];
        }
        for (size_t c = 0; c < cols; c++)
            y[c] /= s;
    }
}
