"""Stand-ins NVRTC gets for the host headers a .cu file includes (`#include <stdio.h>`, `<cstdint>`, `<vector>`...).

NVRTC compiles device code only and ships no C or C++ standard library, so `#include <stdio.h>` alone stops a kernel
file from compiling ("cannot open source file"), although nvcc compiles it. A hand-written kernel's includes that
name a header below get this text instead: what device code may use from it (the fixed-width ints, the limits
macros, `std::numeric_limits` from CCCL), nothing for headers whose device part NVRTC has built in (printf, assert,
the math functions) or that only host code uses (the host code itself is blanked out by `source.device_source`).
`STUBS_ID` is part of the compiler identity (the cache key)."""

from __future__ import annotations

import hashlib

# glibc's LP64 types (int64_t is long): the mangled name of a kernel taking int64_t must be the one nvcc gives it
_STDINT = """#pragma once
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long uint64_t; typedef long intptr_t; typedef unsigned long uintptr_t;
typedef long intmax_t; typedef unsigned long uintmax_t;
#define INT8_MIN (-128)
#define INT16_MIN (-32768)
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807L - 1)
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615UL
"""
_CSTDINT = _STDINT + """namespace std { using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t; using ::intptr_t; using ::uintptr_t; }
"""
_FLOAT = """#pragma once
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-016
#define FLT_DIG 6
#define DBL_DIG 15
"""
_LIMITS_H = """#pragma once
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MIN (-2147483647 - 1)
#define INT_MAX 2147483647
#define UINT_MAX 4294967295U
#define LONG_MIN (-9223372036854775807L - 1)
#define LONG_MAX 9223372036854775807L
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MIN (-9223372036854775807LL - 1)
#define LLONG_MAX 9223372036854775807LL
#define ULLONG_MAX 18446744073709551615ULL
"""
_STDDEF = """#pragma once
typedef decltype(sizeof(0)) size_t;
typedef decltype((char*)0 - (char*)0) ptrdiff_t;
#ifndef NULL
#define NULL 0
#endif
#define offsetof(t, m) __builtin_offsetof(t, m)
"""
_CSTDDEF = _STDDEF + "namespace std { using ::size_t; using ::ptrdiff_t; }\n"
_LIMITS = "#pragma once\n#include <cuda/std/limits>\nnamespace std { using cuda::std::numeric_limits; }\n"
_TYPE_TRAITS = "#pragma once\n#include <cuda/std/type_traits>\nnamespace std { using namespace cuda::std; }\n"

# device code gets what it may use; the rest are empty (printf/assert/math are NVRTC builtins; the others host-only)
_EMPTY = ("stdio.h", "cstdio", "assert.h", "cassert", "stdlib.h", "cstdlib", "string.h", "cstring", "math.h",
          "cmath", "stdbool.h", "cstdbool", "stdarg.h", "cstdarg", "time.h", "ctime", "errno.h", "cerrno",
          "ctype.h", "cctype", "iostream", "iomanip", "fstream", "sstream", "string", "vector", "array", "map",
          "set", "unordered_map", "unordered_set", "algorithm", "numeric", "functional", "utility", "memory",
          "chrono", "random", "thread", "mutex", "atomic", "tuple", "exception", "stdexcept",
          "helper_cuda.h", "helper_functions.h", "helper_string.h", "helper_timer.h", "cuda_profiler_api.h",
          "unistd.h", "sys/time.h")
# headers only host code uses (host libraries, POSIX, the rest of the C++ library): a host function that uses them
# is blanked (host_code), so they are empty. cublas_v2.h is the host API; curand_kernel.h, cuda/*, cub/* are device
# headers and are not here
HOST_ONLY = ("cufftw.h", "curand.h", "cusparse.h", "cusparse_v2.h", "cusolverDn.h", "cusolverSp.h", "cusolverRf.h",
             "cusolver_common.h", "cudnn.h", "nccl.h", "nvml.h", "nvToolsExt.h", "nvtx3/nvToolsExt.h",
             "nvtx3/nvtx3.hpp", "npp.h", "nvjpeg.h", "cupti.h", "cudaProfiler.h", "omp.h", "mpi.h", "pthread.h",
             "sched.h", "signal.h", "csignal", "setjmp.h", "csetjmp", "locale.h", "clocale", "wchar.h", "cwchar",
             "fcntl.h", "dirent.h", "dlfcn.h", "getopt.h", "libgen.h", "malloc.h", "memory.h", "strings.h",
             "sys/resource.h", "sys/types.h", "sys/stat.h", "sys/mman.h", "sys/wait.h", "sys/times.h",
             "sys/sysinfo.h", "sys/ioctl.h", "sys/select.h", "sys/socket.h", "sys/syscall.h", "sys/param.h",
             "sys/utsname.h", "sys/file.h", "sys/timeb.h", "windows.h", "io.h", "process.h", "direct.h",
             "iosfwd", "istream", "ostream", "streambuf", "list", "deque", "queue", "stack", "bitset", "iterator",
             "filesystem", "optional", "variant", "any", "string_view", "condition_variable", "future",
             "shared_mutex", "regex", "locale", "valarray", "typeinfo", "typeindex", "codecvt", "ios", "cfenv",
             "fenv.h", "ctgmath", "ccomplex", "complex", "complex.h", "cuchar", "uchar.h", "wctype.h", "cwctype",
             "execution", "barrier", "latch", "semaphore", "stop_token", "format", "ranges", "numbers", "bit",
             "source_location", "compare", "concepts")
# ... but what they bring in from the CUDA headers, which device code uses without including it (cublas_api.h
# includes cuda_fp16.h and cuda_bf16.h: llm.c's common.h takes __nv_bfloat16 from there)
_CUBLAS = ("#pragma once\n#include <driver_types.h>\n#include <cuComplex.h>\n#include <cuda_fp16.h>\n"
           "#include <cuda_bf16.h>\n#include <library_types.h>\n")
_CUFFT = "#pragma once\n#include <driver_types.h>\n#include <cuComplex.h>\n#include <library_types.h>\n"
LIBRARIES = {**{h: _CUBLAS for h in ("cublas.h", "cublas_v2.h", "cublas_api.h", "cublasLt.h", "cublasXt.h")},
             **{h: _CUFFT for h in ("cufft.h", "cufftXt.h")}}
STUBS: dict[str, str] = {
    **{h: "#pragma once\n" for h in (*_EMPTY, *HOST_ONLY)}, **LIBRARIES,
    "stdint.h": _STDINT, "cstdint": _CSTDINT, "inttypes.h": _STDINT, "cinttypes": _CSTDINT,
    "float.h": _FLOAT, "cfloat": _FLOAT, "limits.h": _LIMITS_H, "climits": _LIMITS_H,
    "stddef.h": _STDDEF, "cstddef": _CSTDDEF, "limits": _LIMITS + _LIMITS_H, "type_traits": _TYPE_TRAITS,
}


# what nvcc's cuda_runtime.h brings in from the host math.h, which kernels use without including anything
PRELUDE_NAME = "devicekit_nvrtc_prelude.h"
PRELUDE = """#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
"""
STUBS_ID = hashlib.sha256(repr((sorted(STUBS.items()), PRELUDE)).encode()).hexdigest()[:12]
# with CCCL on the include path its C headers are the device versions of these (one definition of FLT_MAX, ...)
_CCCL = {"float.h": "cfloat", "cfloat": "cfloat", "limits.h": "climits", "climits": "climits"}


def stubs_for(own: tuple[str, ...] = (), cccl: bool = True) -> dict[str, str]:
    """Every stand-in, whoever includes it (the .cu file, its own headers, a CUDA header: the wheel's cuda.h
    includes <stdint.h>), but the names in `own` (headers of the file's own, found on its include path, which NVRTC
    reads as they are); plus the prelude every hand-written kernel gets (`--pre-include`)."""
    out = {PRELUDE_NAME: PRELUDE}
    skip = set(own)
    for h, text in STUBS.items():
        if h in skip:
            continue
        out[h] = f"#pragma once\n#include <cuda/std/{_CCCL[h]}>\n" if h in _CCCL and cccl else text
    return out
