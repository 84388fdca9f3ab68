/* Escape-time Mandelbrot: image size, window and iteration cap as scalars, in the order programs pass them */
void mandelbrot(int *iters, int width, int height, float x0, float y0, float dx, float dy, int max_iter)
{
    for (int py = 0; py < height; py++) {
        for (int px = 0; px < width; px++) {
            float cr = x0 + px * dx, ci = y0 + py * dy;
            float zr = 0.0f, zi = 0.0f;
            int it = 0;
            while (zr * zr + zi * zi <= 4.0f && it < max_iter) {
                float t = zr * zr - zi * zi + cr;
                zi = 2.0f * zr * zi + ci;
                zr = t;
                it++;
            }
            iters[py * width + px] = it;
        }
    }
}
