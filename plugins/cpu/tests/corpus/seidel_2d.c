/* PolyBench/C 4.2 seidel-2d (in place, so the order of updates matters) */
#define DATA_TYPE double
#define SCALAR_VAL(x) x

void kernel_seidel_2d(int tsteps,
                      int n,
                      DATA_TYPE A[n][n])
{
  int t, i, j;

#pragma scop
  for (t = 0; t <= tsteps - 1; t++)
    for (i = 1; i <= n - 2; i++)
      for (j = 1; j <= n - 2; j++)
        A[i][j] = (A[i-1][j-1] + A[i-1][j] + A[i-1][j+1]
                   + A[i][j-1] + A[i][j] + A[i][j+1]
                   + A[i+1][j-1] + A[i+1][j] + A[i+1][j+1]) / SCALAR_VAL(9.0);
#pragma endscop
}
