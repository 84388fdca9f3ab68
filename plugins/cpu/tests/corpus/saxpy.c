/* Single-precision a*x plus y, in the reference BLAS argument order (n, alpha, x, incx, y, incy). */
void saxpy(int n, float sa, const float *sx, int incx, float *sy, int incy)
{
    int i, ix, iy;
    if (n <= 0) return;
    if (sa == 0.0f) return;
    if (incx == 1 && incy == 1) {
        for (i = 0; i < n; i++)
            sy[i] += sa * sx[i];
        return;
    }
    ix = incx < 0 ? (-n + 1) * incx : 0;
    iy = incy < 0 ? (-n + 1) * incy : 0;
    for (i = 0; i < n; i++) {
        sy[iy] += sa * sx[ix];
        ix += incx;
        iy += incy;
    }
}
