"""The core's render step (devicekit.render.prepare) does for every GPU renderer what each used to do for itself:
the thread and local-memory limits (one KernelError, one message: kernel, value, limit), the `shared_bytes` meta,
hoisting local arrays, and the renderer's extra passes (`Capabilities.passes`). Real renderers, no device needed."""

from __future__ import annotations

import dataclasses

import pytest
from devicekit import ir
from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import KernelError, UOp
from devicekit.render.cstyle import CStyleRenderer
from devicekit.render.prepare import hoist_locals, prepare, shared_bytes
from devicekit.render.renderer import Capabilities
from devicekit_cuda.renderer import CUDARenderer
from devicekit_metal.renderer import MetalRenderer
from devicekit_opencl.renderer import OpenCLRenderer
from devicekit_webgpu.renderer import WGSLRenderer

RENDERERS = {"CUDA": CUDARenderer, "METAL": MetalRenderer, "OPENCL": OpenCLRenderer, "WEBGPU": WGSLRenderer}


def block_kernel(name: str, width: int, threads: int):
    """A workgroup of `threads` reversing `width` float32s through a local array."""
    k = ir.KernelBuilder(name)
    nb = k.var("nb", lo=1, hi=64)
    x = k.param("x", dtypes.float32, size=nb * threads)
    o = k.param("o", dtypes.float32, size=nb * threads, writable=True)
    g, t = k.range(nb, kind="global"), k.range(threads, kind="local")
    smem = k.local("smem", dtypes.float32, width)
    smem[t % width] = x[g * threads + t]
    k.barrier()
    o[g * threads + t] = smem[(width - 1 - t) % width]
    return k.build()


@pytest.mark.parametrize("kind", sorted(RENDERERS))
def test_too_many_threads_is_one_kernel_error(kind):
    r = RENDERERS[kind]()
    limit = r.capabilities.local_total_max
    with pytest.raises(KernelError) as e:
        r.render(block_kernel("wide", 16, 2 * limit))
    assert str(e.value) == (f"kernel 'wide' launches {2 * limit} threads a workgroup (local size ({2 * limit},)); "
                            f"{kind} allows at most {limit} (local_total_max)")


@pytest.mark.parametrize("kind", sorted(RENDERERS))
def test_too_much_local_memory_is_one_kernel_error(kind):
    r = RENDERERS[kind]()
    limit = r.capabilities.shared_max
    n = limit // 4 + 1
    with pytest.raises(KernelError) as e:
        r.render(block_kernel("big", n, 16))
    assert str(e.value) == (f"kernel 'big' declares {4 * n} bytes of local memory (smem: {4 * n}); {kind} allows "
                            f"at most {limit} a workgroup (shared_max)")


@pytest.mark.parametrize("kind", sorted(RENDERERS))
def test_limits_are_inclusive_and_shared_bytes_is_in_the_meta(kind):
    r = RENDERERS[kind]()
    caps = r.capabilities
    n = min(caps.shared_max // 4, 1024)
    spec = r.render(block_kernel("fits", n, min(caps.local_total_max, 256)))
    assert spec.meta[0] == ("shared_bytes", 4 * n)


def test_capabilities_are_built_by_keyword_and_carry_the_thread_limit():
    with pytest.raises(TypeError):
        Capabilities(frozenset(), frozenset())  # type: ignore[misc]
    assert CUDARenderer().capabilities.local_total_max == 1024
    assert MetalRenderer().capabilities.local_total_max == 1024
    assert OpenCLRenderer(local_total_max=64).capabilities.local_total_max == 64
    assert WGSLRenderer(local_total_max=128).capabilities.local_total_max == 128


def test_cuda_launch_bound_comes_from_the_header_hook():
    """The bound is part of the header the base assembles (kernel_attributes), not a text edit of the output."""
    r = CUDARenderer()
    spec = r.render(block_kernel("lb", 64, 64))
    assert 'extern "C" __global__ void __launch_bounds__(64) dku_lb(' in spec.src

    class NoBounds(CUDARenderer):
        def kernel_attributes(self, lk) -> str:
            return ""

    assert "__launch_bounds__" not in NoBounds().render(block_kernel("lb", 64, 64)).src


@pytest.mark.parametrize("kind", ["METAL", "OPENCL"])
def test_local_arrays_are_hoisted_by_the_core_pass(kind):
    r = RENDERERS[kind]()
    assert hoist_locals in r.capabilities.passes
    lk = prepare(block_kernel("h", 64, 64), r.capabilities)
    assert lk.uops[0].op is Ops.DEFINE_LOCAL
    assert shared_bytes(lk) == 256


def test_a_renderers_pass_runs_before_it_renders():
    """Capabilities.passes (tinygrad's extra_matcher): a renderer adds a linear pass; the core runs it, in order."""
    seen: list[int] = []

    def count(uops):
        seen.append(len(uops))
        return uops

    def negate_stores(uops):  # store -x instead of x: visible in the source
        out, m = [], {}
        for u in uops:
            src = tuple(m.get(s, s) for s in u.src)
            if u.op is Ops.STORE:
                neg = UOp(Ops.NEG, src[1].dtype, (src[1],))
                out.append(neg)
                src = (src[0], neg, *src[2:])
            nu = u if src == u.src else u.replace(src=src)
            m[u] = nu
            out.append(nu)
        return out

    class Neg(CStyleRenderer):
        device = "TOY"
        passes = (count, negate_stores)

    k = ir.KernelBuilder("p")
    a = k.param("a", dtypes.float32, 4)
    o = k.param("o", dtypes.float32, 4, writable=True)
    i = k.range(4)
    o[i] = a[i]
    spec = Neg().render(k.build())
    assert seen and "(-val" in spec.src
    assert dataclasses.replace(Neg().capabilities, passes=()).passes == ()
