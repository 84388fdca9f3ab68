/* trmm in the style of PolyBench/C 4.2.1 (written for this corpus): B := alpha * A^T * B, A unit lower triangular.
   As published: a `static` kernel, its types and array dims from a header found through include_dirs=, C99 params
   chosen by a define (the suite's Makefile passes -I utilities -DPOLYBENCH_USE_C99_PROTO). */
#include <stdio.h>
#include <polystyle.h>

static
void kernel_trmm(int m, int n,
                 DATA_TYPE alpha,
                 DATA_TYPE POLYBENCH_2D(A,M,M,m,m),
                 DATA_TYPE POLYBENCH_2D(B,M,N,m,n))
{
  int i, j, k;

#pragma scop
  for (i = 0; i < m; i++)
     for (j = 0; j < n; j++) {
        for (k = i+1; k < m; k++)
           B[i][j] += A[k][i] * B[k][j];
        B[i][j] = alpha * B[i][j];
     }
#pragma endscop
}
