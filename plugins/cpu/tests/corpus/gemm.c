/* PolyBench/C 4.2 gemm: C := alpha*A*B + beta*C */
#define DATA_TYPE double

void kernel_gemm(int ni, int nj, int nk,
                 DATA_TYPE alpha,
                 DATA_TYPE beta,
                 DATA_TYPE C[ni][nj],
                 DATA_TYPE A[ni][nk],
                 DATA_TYPE B[nk][nj])
{
  int i, j, k;

#pragma scop
  for (i = 0; i < ni; i++) {
    for (j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (k = 0; k < nk; k++) {
       for (j = 0; j < nj; j++)
          C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
#pragma endscop
}
