"""The fuzzer's compile-only check (`Runner._can_compile`, used when a kind cannot run here) probed with one fixed
kernel; WEBGPU refuses that kernel's uint64 data by name (a KernelError), so a WEBGPU campaign whose probe had timed
out under load died at start with a traceback instead of compiling."""

import pytest
from devicekit.ir import KernelError
from devicekit.testing.fuzz import Runner
from devicekit.testing.fuzzgen import fuzz_kernel


def test_the_compile_only_probe_skips_kernels_the_kind_refuses():
    import devicekit as dk
    try:
        pair = dk.target("WEBGPU").pair(0)
    except Exception as e:  # noqa: BLE001 - the plugin or its adapter is missing
        pytest.skip(f"WEBGPU unavailable: {e}")
    with pytest.raises(KernelError, match="does not support"):
        pair[0].render(fuzz_kernel(1, shapes=("elementwise",)).kernel)
    runner = Runner.__new__(Runner)
    runner.targets = {"WEBGPU/wgsl": pair}
    assert runner._can_compile()


def test_a_documented_data_limit_is_unsupported_not_a_finding(webgpu_runner):
    """WEBGPU refuses, at launch and by name (DataRangeError), int64 data outside int32 (WGSL has no 64-bit ints):
    fuzz seeds 51124 and 51152 of profile mixed were counted as findings ("error: ValueError") before."""
    from devicekit.errors import DataRangeError
    from devicekit.testing.fuzzgen import make_case
    runner = webgpu_runner
    case = make_case(51124, "mixed")
    label = next(iter(runner.targets))
    with pytest.raises(DataRangeError, match="outside int32"):
        runner._run(case.kernel, runner.targets[label], case.inputs)
    assert runner.check_one(label, case.kernel, case.inputs, runner.reference(case))[0] == "unsupported"
