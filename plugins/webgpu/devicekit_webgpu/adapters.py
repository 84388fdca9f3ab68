"""Which WebGPU adapters are WEBGPU:0, WEBGPU:1, ...: wgpu-native's adapters on the native backends (Vulkan, Metal,
D3D12; OpenGL's are left out: the same GPU again, through a weaker API), in wgpu's order. One wgpu device per id,
made on first use and shared by that id's compiler, allocator and runtime (a buffer or pipeline of one GPUDevice must
never meet another's). Also the probe's answer, whose priority depends on what was found: a real GPU outranks the CPU
device (10), a software adapter (lavapipe's "llvmpipe", adapter type CPU) ranks below it, as OPENCL does for PoCL."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

from devicekit import platforms
from devicekit.per_index import per_index
from devicekit.plugin import Availability

BACKENDS = ("Vulkan", "Metal", "DX12")
NO_ADAPTER = ("no WebGPU adapter found: install a Vulkan driver (your GPU vendor's, or Mesa's lavapipe for the host "
              "CPU: apt-get install mesa-vulkan-drivers), or Metal/D3D12 on macOS/Windows")


class Unavailable(platforms.Unavailable):
    """No usable WebGPU adapter; the message says why and what to do."""


_lock = threading.RLock()
_adapters: list[Any] | None = None


def adapters() -> list[Any]:
    """The adapters, once per process (Unavailable when wgpu cannot be imported or finds none)."""
    global _adapters
    with _lock:
        if _adapters is None:
            try:
                import wgpu
                from wgpu.backends.wgpu_native import extras
            except ImportError as e:
                raise Unavailable(f"wgpu cannot be imported ({e}): pip install wgpu") from e
            try:
                extras.set_instance_extras(backends=list(BACKENDS))
            except Exception:  # noqa: BLE001, S110 - the instance exists already (someone asked first): take it as is
                pass
            try:
                with _quiet_wsi():
                    found = list(wgpu.gpu.enumerate_adapters_sync())
            except Exception as e:
                raise Unavailable(f"{NO_ADAPTER} ({type(e).__name__}: {e})") from e
            _adapters = [a for a in found if a.info.get("backend_type") in BACKENDS]
        if not _adapters:
            raise Unavailable(NO_ADAPTER)
        return _adapters


@contextlib.contextmanager
def _quiet_wsi():
    """Mesa's Vulkan drivers print "error: XDG_RUNTIME_DIR is invalid or not set" to fd 2 for every window-system
    probe of a process without a desktop session (a server, CI), four times per enumeration: every device listing
    of every process would show it. Those lines are dropped; anything else written to fd 2 meanwhile is passed on."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            rest = [x for x in tmp.read().decode(errors="replace").splitlines(keepends=True)
                    if "XDG_RUNTIME_DIR" not in x]
            if rest:
                os.write(2, "".join(rest).encode())


def is_software(adapter: Any) -> bool:
    return adapter.info.get("adapter_type") not in ("DiscreteGPU", "IntegratedGPU")


def describe(adapter: Any) -> str:
    i = adapter.info
    return f"{i.get('device', '?')} ({i.get('backend_type', '?')}, {i.get('adapter_type', '?')}, {i.get('description', '')})"


def probe() -> Availability:
    return platforms.probe(adapters, lambda a: not is_software(a))


def count() -> int:
    try:
        return len(adapters())
    except Unavailable:
        return 0


@dataclass(eq=False)
class Ctx:
    """One id: its adapter, its GPUDevice (with shader-f16 where the adapter has it, and the adapter's limits) and a
    lock around queue writes that must stay next to their submit."""

    index: int
    adapter: Any
    device: Any
    limits: dict
    features: frozenset
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def loop_limit(self) -> int | None:
        """Loop iterations one invocation may run, where the driver cuts them short silently: Mesa's llvmpipe (and
        lavapipe on it) stops every loop of an invocation after 65,535 iterations in all (its loop limiter,
        LP_MAX_TGSI_LOOP_ITERATIONS), and the shader goes on with wrong values; None elsewhere."""
        return 65535 if "llvmpipe" in str(self.adapter.info.get("device", "")) else None

    @property
    def name(self) -> str:
        return "WEBGPU" if self.index == 0 else f"WEBGPU:{self.index}"

    def wait(self) -> None:
        """Block until the work submitted so far has finished: a 4-byte copy submitted after it, mapped (wgpu-py's
        on_submitted_work_done_sync does not work with every wgpu-native)."""
        import wgpu
        u = wgpu.BufferUsage
        src = self.device.create_buffer(size=4, usage=u.COPY_SRC)
        dst = self.device.create_buffer(size=4, usage=u.MAP_READ | u.COPY_DST)
        enc = self.device.create_command_encoder()
        enc.copy_buffer_to_buffer(src, 0, dst, 0, 4)
        self.device.queue.submit([enc.finish()])
        dst.map_sync(wgpu.MapMode.READ)
        dst.unmap()


@per_index
def get(index: int) -> Ctx:
    """The context of WEBGPU:index (Unavailable when it does not exist)."""
    found = adapters()
    if not 0 <= index < len(found):
        raise Unavailable(f"WEBGPU:{index} does not exist: {len(found)} adapter(s) here")
    a = found[index]
    feats = frozenset(a.features) & {"shader-f16", "timestamp-query"}
    keys = ("max-compute-workgroup-size-x", "max-compute-workgroup-size-y", "max-compute-workgroup-size-z",
            "max-compute-invocations-per-workgroup", "max-compute-workgroup-storage-size",
            "max-storage-buffers-per-shader-stage", "max-compute-workgroups-per-dimension",
            "max-storage-buffer-binding-size", "max-buffer-size", "min-storage-buffer-offset-alignment",
            "max-bindings-per-bind-group")
    limits = {k: a.limits[k] for k in keys}
    dev = a.request_device_sync(required_features=sorted(feats), required_limits=dict(limits))
    return Ctx(index, a, dev, dict(dev.limits), feats)
