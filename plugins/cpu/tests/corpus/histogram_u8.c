#include <stddef.h>
#include <string.h>

/* Byte histogram into a fixed 256-bin array param: the extent 256 is the buffer's size */
void histogram(const unsigned char *data, size_t n, unsigned int hist[256])
{
    memset(hist, 0, 256 * sizeof(unsigned int));
    for (size_t i = 0; i < n; i++)
        hist[data[i]]++;
}
