/* PolyBench-style mvt written with pointer-to-row params, double (*A)[n]: the row count is not in the type */
#define DATA_TYPE double

void kernel_mvt(int n,
                DATA_TYPE x1[n], DATA_TYPE x2[n],
                DATA_TYPE y_1[n], DATA_TYPE y_2[n],
                DATA_TYPE (*A)[n])
{
  int i, j;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x1[i] = x1[i] + A[i][j] * y_1[j];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x2[i] = x2[i] + A[j][i] * y_2[j];
}
