/* Cache-blocked transpose with C99 VLA params and restrict inside the brackets */
#define BS 16

void transpose(int n, int m, const float A[restrict n][m], float B[restrict m][n])
{
    for (int ii = 0; ii < n; ii += BS)
        for (int jj = 0; jj < m; jj += BS)
            for (int i = ii; i < ii + BS && i < n; i++)
                for (int j = jj; j < jj + BS && j < m; j++)
                    B[j][i] = A[i][j];
}
