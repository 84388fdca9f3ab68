/* PolyBench/C 4.2 heat-3d: 3-D VLA params */
#define DATA_TYPE double
#define SCALAR_VAL(x) x

void kernel_heat_3d(int tsteps,
                    int n,
                    DATA_TYPE A[n][n][n],
                    DATA_TYPE B[n][n][n])
{
  int t, i, j, k;

#pragma scop
  for (t = 1; t <= tsteps; t++) {
    for (i = 1; i < n-1; i++) {
      for (j = 1; j < n-1; j++) {
        for (k = 1; k < n-1; k++) {
          B[i][j][k] =   SCALAR_VAL(0.125) * (A[i+1][j][k] - SCALAR_VAL(2.0) * A[i][j][k] + A[i-1][j][k])
                       + SCALAR_VAL(0.125) * (A[i][j+1][k] - SCALAR_VAL(2.0) * A[i][j][k] + A[i][j-1][k])
                       + SCALAR_VAL(0.125) * (A[i][j][k+1] - SCALAR_VAL(2.0) * A[i][j][k] + A[i][j][k-1])
                       + A[i][j][k];
        }
      }
    }
    for (i = 1; i < n-1; i++) {
      for (j = 1; j < n-1; j++) {
        for (k = 1; k < n-1; k++) {
          A[i][j][k] =   SCALAR_VAL(0.125) * (B[i+1][j][k] - SCALAR_VAL(2.0) * B[i][j][k] + B[i-1][j][k])
                       + SCALAR_VAL(0.125) * (B[i][j+1][k] - SCALAR_VAL(2.0) * B[i][j][k] + B[i][j-1][k])
                       + SCALAR_VAL(0.125) * (B[i][j][k+1] - SCALAR_VAL(2.0) * B[i][j][k] + B[i][j][k-1])
                       + B[i][j][k];
        }
      }
    }
  }
#pragma endscop
}
