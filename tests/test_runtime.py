import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import DeviceKitError
from devicekit.ir.dtypes import dtypes
from devicekit.memory import Buffer
from devicekit.render.program_spec import ParamSpec, VarSpec
from dkfix_toy.toylang import ToyKernel, ToyProgram, var

N = var("n", 1, 1000)
SAXPY = ToyKernel("saxpy",
                  (ParamSpec("x", dtypes.float32, N, False), ParamSpec("y", dtypes.float32, N, False),
                   ParamSpec("out", dtypes.float32, N, True)),
                  (VarSpec("n", 1, 1000),),
                  "out[:n] = x[:n] * np.float32(2) + y[:n]\n")


@pytest.fixture
def dev(registry):
    return dk.device("TOY")


@pytest.fixture
def prog(dev):
    return dev.compile(SAXPY)


def bufs(dev, n=8, dt=dtypes.float32):
    x = Buffer(dev, n, dt).copyin(np.arange(n).astype(dt.np))
    y = Buffer(dev, n, dt).copyin(np.ones(n, dt.np))
    return x, y, Buffer(dev, n, dt)


def test_compile_is_memoized_per_kernel_key(dev, prog):
    assert isinstance(prog, ToyProgram) and prog.device is dev and prog.spec.name == "saxpy"
    assert dev.compile(SAXPY) is prog
    assert dev.compile(SAXPY, name="other") is not prog
    assert dev.compile(SAXPY, pair="toy") is prog and dev.compile(SAXPY, pair=0) is prog
    with pytest.raises(KeyError, match="no compiler pair 'nope'"):
        dev.compile(SAXPY, pair="nope")


def test_execute(dev, prog):
    x, y, out = bufs(dev)
    t = prog.execute([x, y, out], [8], wait=True)
    assert isinstance(t, float) and t >= 0
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 2 + 1)
    assert not prog.execute([x, y, out], [8]).done  # a Launch handle when not waiting


def test_execute_checks_before_launch(dev, prog):
    x, y, out = bufs(dev)
    with pytest.raises(TypeError, match=r"expected 3 buffers \(x, y, out\), got 2"):
        prog.execute([x, y], [8])
    with pytest.raises(TypeError, match="'y' must be a devicekit Buffer"):
        prog.execute([x, np.ones(8, np.float32), out], [8])
    with pytest.raises(TypeError, match=r"'out' is dtypes.float32, the buffer is dtypes.int32"):
        prog.execute([x, y, Buffer(dev, 8, dtypes.int32)], [8])
    with pytest.raises(ValueError, match=r"'x' needs 9 elements .* has 8"):
        prog.execute([x, y, out], [9])
    with pytest.raises(ValueError, match=r"n=0 is outside its declared range \[1, 1000\]"):
        prog.execute([x, y, out], [0])
    with pytest.raises(TypeError, match="int vars"):
        prog.execute([x, y, out], [])
    assert not out.is_allocated  # nothing ran


def test_execute_refuses_buffers_of_another_kind(registry):
    import types

    from devicekit.memory import HostAllocator
    from devicekit.plugin import AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer

    m = types.ModuleType("toy2")
    m.devicekit_device_kinds = dk.hookimpl(lambda: [DeviceKind("TOY2", priority=-99)])
    m.devicekit_allocator = dk.hookimpl(lambda spec: AllocatorFactory(HostAllocator) if spec.kind == "TOY2" else None)
    m.devicekit_compiler_pairs = dk.hookimpl(lambda spec: [CompilerPairFactory(
        "toy2", ToyRenderer, lambda s: ToyCompiler())] if spec.kind == "TOY2" else [])
    m.devicekit_runtime_factory = dk.hookimpl(lambda spec: RuntimeFactoryDecl(lambda s: ToyProgram)
                                              if spec.kind == "TOY2" else None)
    registry.register_plugin(m)
    prog = dk.device("TOY").compile(SAXPY)
    _, y, out = bufs(dk.device("TOY"))
    foreign = Buffer("TOY2", 8, dtypes.float32)
    with pytest.raises(ValueError, match="'x' is a buffer on TOY2, the program runs on TOY"):
        prog.execute([foreign, y, out], [8])


def test_run_returns_writable_params(registry):
    x = np.arange(6, dtype=np.float32)
    y = np.full(6, 0.5, np.float32)
    outs = dk.run(SAXPY, device="TOY", x=x, y=y, out=np.empty(6, np.float32), n=6)
    assert set(outs) == {"out"}
    np.testing.assert_array_equal(outs["out"], x * 2 + y)
    outs2 = dk.run(SAXPY, device="TOY", x=x, y=y, n=6)  # out omitted: zero-allocated, sized from n
    np.testing.assert_array_equal(outs2["out"], outs["out"])
    outs3 = dk.run(SAXPY, x=x.reshape(2, 3), y=y.reshape(2, 3), out=np.empty((2, 3), np.float32), n=6)
    assert outs3["out"].shape == (2, 3)  # the default device (TOY here)


def test_run_argument_errors(registry):
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(TypeError, match="unexpected argument.*z.*params x, y, out and vars n"):
        dk.run(SAXPY, device="TOY", x=x, y=x, n=4, z=1)
    with pytest.raises(TypeError, match="missing int var"):
        dk.run(SAXPY, device="TOY", x=x, y=x)
    with pytest.raises(TypeError, match="missing input array for param 'y'"):
        dk.run(SAXPY, device="TOY", x=x, n=4)
    with pytest.raises(TypeError, match="param 'y'.*dtype mismatch"):
        dk.run(SAXPY, device="TOY", x=x, y=x.astype(np.float64), n=4)
    with pytest.raises(ValueError, match="'x' needs 5 elements"):
        dk.run(SAXPY, device="TOY", x=x, y=x, n=5)
    with pytest.raises(TypeError, match="var 'n' must be an int"):
        dk.run(SAXPY, device="TOY", x=x, y=x, n=4.0)


def test_program_from_source(registry):
    src = "#! params a:int32:n b:int32:n:w\n#! vars n:1:64\nb[:n] = a[:n] * a[:n]\n"
    dev = dk.device("TOY")
    prog = dev.program_from_source(src, "square")
    assert prog.spec.name == "square" and [p.name for p in prog.spec.params] == ["a", "b"]
    a = Buffer(dev, 5, dtypes.int32).copyin(np.arange(5, dtype=np.int32))
    b = Buffer(dev, 5, dtypes.int32)
    prog.execute([a, b], [5])
    np.testing.assert_array_equal(b.numpy(), np.arange(5) ** 2)


def test_program_from_source_needs_a_parser(registry):
    from devicekit.memory import HostAllocator
    from devicekit.targets import Device
    from dkfix_toy.toylang import ToyCompiler, ToyRenderer

    class NoParse(ToyRenderer):
        parse_source = None

    d = Device("TOY", HostAllocator("TOY"), NoParse(), ToyCompiler(), ToyProgram)
    assert d.pair_names == ["toyc"] and d.renderer.lang == "toy"
    with pytest.raises(DeviceKitError, match="can read hand-written source"):
        d.program_from_source("x = 1", "k")


def test_named_launch_binds_params_and_vars_by_name(dev, prog):
    x, y, out = bufs(dev)
    prog(y=y, out=out, x=x, n=8, wait=True)  # any order; the Buffers are used as they are
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 2 + 1)
    assert prog.bind({"x": x, "y": y, "out": out, "n": 4}) == ([x, y, out], [4], {})
    out3 = Buffer(dev, 8, dtypes.float32).copyin(np.zeros(8, np.float32))
    prog([x, y, out3], [3])  # positional is execute
    np.testing.assert_array_equal(out3.numpy(), [1, 3, 5, 0, 0, 0, 0, 0])
    with pytest.raises(TypeError, match=r"saxpy: missing argument\(s\) out, n"):
        prog(x=x, y=y)
    with pytest.raises(TypeError, match=r"saxpy: unexpected argument\(s\) z; the kernel takes params x, y, out "
                                        r"and vars n"):
        prog(x=x, y=y, out=out, n=8, z=1)
    with pytest.raises(TypeError, match=r"unexpected argument\(s\) m;"):  # as many names as the kernel's, one wrong
        prog(x=x, y=y, out=out, m=8)
    with pytest.raises(TypeError, match="param 'x' must be a devicekit Buffer"):  # execute's own checks apply
        prog(x=np.zeros(8, np.float32), y=y, out=out, n=8)


# ---- issue 31.1: one launch path, owned by the core; messages a newcomer meets


def test_no_backend_overrides_the_core_launch_path():
    """Every installed backend's Program implements `_launch` (and maybe `plan_record`), nothing above it: the
    checks and the launch memo are the core's, for all of them."""
    import importlib

    from devicekit.runtime import Program
    for mod in ("devicekit_cpu.runtime", "devicekit_opencl.runtime", "devicekit_cuda.runtime", "devicekit_ray.runtime",
                "devicekit_metal.runtime", "devicekit_acme.runtime", "devicekit.reference.device"):
        try:
            importlib.import_module(mod)
        except ImportError:
            continue

    def every(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from every(sub)
    seen = list(every(Program))
    assert any(c.__name__ == "CPUProgram" for c in seen) and any(c.__name__ == "PythonProgram" for c in seen)
    import inspect
    for cls in seen:
        for name in ("check", "_execute_checked", "_signature", "_repeat", "bind"):
            assert name not in cls.__dict__, f"{cls.__module__}.{cls.__name__} overrides Program.{name}"
        for name in ("execute", "__call__"):  # a spelling of the arguments may be added; the launch stays the core's
            if name in cls.__dict__:
                src = inspect.getsource(cls.__dict__[name])
                assert f"super().{name}(" in src and "_launch" not in src, \
                    f"{cls.__module__}.{cls.__name__}.{name} launches by itself instead of through Program.{name}"


def test_the_seed_path_program_takes_the_same_fast_path(monkeypatch):
    """`dev.runtime(dev.compiler.compile(dev.renderer.render(k)))` has no device: after its first launch (the full
    check) its launches take the compiled checker and the repeat memo like a `dev.compile` Program's."""
    from devicekit import kernels
    from devicekit.runtime import Program
    cpu = dk.device("CPU")
    k = kernels.elementwise("a * b + c", name="seed_fast")
    seed = cpu.runtime(cpu.compiler.compile(cpu.renderer.render(k)))
    assert seed.device is None
    full = []
    real = Program._execute_checked
    monkeypatch.setattr(Program, "_execute_checked", lambda self, *a: full.append(1) or real(self, *a))
    sets = [[dk.Buffer(cpu, 16, "float32").copyin(np.full(16, 2, np.float32)) for _ in range(4)] for _ in range(2)]
    for _ in range(5):
        for bufs in sets:
            seed.execute(bufs, [16])
    assert len(full) == 1, "only the first launch of a device-less Program takes the full check"
    np.testing.assert_array_equal(sets[1][3].numpy(), np.full(16, 6, np.float32))
    with pytest.raises(ValueError, match="needs 17 elements"):
        seed.execute(sets[0], [17])


def test_a_numpy_array_for_a_buffer_says_how_to_pass_it():
    from devicekit import kernels
    prog = dk.device("CPU").compile(kernels.elementwise("a + 1.0", inputs=("a",), name="how_to_buffer"))
    out = dk.Buffer("CPU", 4, "float32")
    with pytest.raises(TypeError, match=r"param 'a' must be a devicekit Buffer, got ndarray: wrap an array with "
                                        r"dk.from_numpy\(arr\).*copyin\(arr\).*dk.run\(kernel"):
        prog.execute([np.zeros(4, np.float32), out], [4])


def test_argument_name_typos_get_a_did_you_mean():
    from devicekit import kernels
    cpu = dk.device("CPU")
    k = kernels.elementwise("x + 1.0", inputs=("x",), name="typo_inc")
    prog = cpu.compile(k)
    x, out = dk.Buffer(cpu, 4, "float32"), dk.Buffer(cpu, 4, "float32")
    with pytest.raises(TypeError, match=r"unexpected argument\(s\) X \(did you mean 'x' for 'X'\?\)"):
        prog(X=x, out=out, n=4)
    with pytest.raises(TypeError, match=r"unexpected argument\(s\) ouy \(did you mean 'out' for 'ouy'\?\)"):
        dk.run(k, cpu, x=np.zeros(4, np.float32), ouy=np.zeros(4, np.float32), n=4)
    with pytest.raises(TypeError, match=r"unexpected argument\(s\) zzz;"):  # nothing close: no guess
        prog(x=x, out=out, n=4, zzz=1)


def test_a_program_without_a_device_refuses_buffers_of_another_id_of_its_kind():
    """A seed-path Program (`dev.runtime(...)`, no Device) whose runtime names the id it was loaded on (`home`: RAY:1,
    ACME:1) refuses Buffers of another id of its kind: on RAY it copied nothing to the right actor and read zeros."""
    from devicekit import ir
    from devicekit.ir import dtypes as dt
    k = ir.KernelBuilder("home_copy")
    n = k.var("n", 1, 64)
    x, o = k.param("x", dt.float32, n), k.param("o", dt.float32, n, writable=True)
    i = k.range(n, "global")
    o[i] = x[i] * 3.0
    acme1 = dk.device("ACME:1")
    prog = acme1.runtime(acme1.compiler.compile(acme1.renderer.render(k.build())))
    assert prog.device is None and str(prog.home) == "ACME:1"
    other = dk.device("ACME")
    with pytest.raises(ValueError, match="runs on ACME:1"):
        prog.execute([dk.Buffer(other, 4, "float32"), dk.Buffer(other, 4, "float32")], [4], wait=True)
    xs = dk.Buffer(acme1, 4, "float32").copyin(np.arange(4, dtype=np.float32))
    out = dk.Buffer(acme1, 4, "float32")
    prog.execute([xs, out], [4], wait=True)
    assert out.numpy().tolist() == [0.0, 3.0, 6.0, 9.0]
