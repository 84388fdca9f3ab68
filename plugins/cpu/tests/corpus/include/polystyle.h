/* A header in the style of PolyBench/C's utilities/polybench.h (written for this corpus): array params spelled by
   a macro that gives C99 VLA params when POLYBENCH_USE_C99_PROTO is defined, fixed dims otherwise. */
#ifndef POLYSTYLE_H
#define POLYSTYLE_H
#ifndef DATA_TYPE
# define DATA_TYPE double
#endif
#ifdef POLYBENCH_USE_C99_PROTO
# define POLYBENCH_2D(var, dim1, dim2, ddim1, ddim2) var[ddim1][ddim2]
#else
# define POLYBENCH_2D(var, dim1, dim2, ddim1, ddim2) var[dim1][dim2]
#endif
#define SCALAR_VAL(x) x
#endif
