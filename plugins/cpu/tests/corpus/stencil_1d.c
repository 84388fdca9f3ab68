/* 1-D stencil: out[i] = sum of in[i-radius .. i+radius], edges clamped */
void stencil_1d(const float *in, float *out, int n, int radius)
{
    for (int i = 0; i < n; i++) {
        float s = 0.0f;
        for (int k = -radius; k <= radius; k++) {
            int j = i + k;
            if (j < 0) j = 0;
            if (j > n - 1) j = n - 1;
            s += in[j];
        }
        out[i] = s;
    }
}
