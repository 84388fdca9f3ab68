/* PolyBench/C 4.2 covariance, float_n passed as a double scalar between int dims and arrays */
#define DATA_TYPE double
#define SCALAR_VAL(x) x

void kernel_covariance(int m, int n,
                       DATA_TYPE float_n,
                       DATA_TYPE data[n][m],
                       DATA_TYPE cov[m][m],
                       DATA_TYPE mean[m])
{
  int i, j, k;

#pragma scop
  for (j = 0; j < m; j++)
    {
      mean[j] = SCALAR_VAL(0.0);
      for (i = 0; i < n; i++)
        mean[j] += data[i][j];
      mean[j] /= float_n;
    }

  for (i = 0; i < n; i++)
    for (j = 0; j < m; j++)
      data[i][j] -= mean[j];

  for (i = 0; i < m; i++)
    for (j = i; j < m; j++)
      {
        cov[i][j] = SCALAR_VAL(0.0);
        for (k = 0; k < n; k++)
          cov[i][j] += data[k][i] * data[k][j];
        cov[i][j] /= (float_n - SCALAR_VAL(1.0));
        cov[j][i] = cov[i][j];
      }
#pragma endscop
}
