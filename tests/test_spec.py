import pytest
from devicekit.spec import DeviceSpec
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize("text, kind, index, canonical", [
    ("CPU", "CPU", 0, "CPU"),
    ("cpu", "CPU", 0, "CPU"),
    ("cuda:1", "CUDA", 1, "CUDA:1"),
    ("CUDA:0", "CUDA", 0, "CUDA"),
    (" Metal : 3 ", "METAL", 3, "METAL:3"),
    ("my_vendor2:12", "MY_VENDOR2", 12, "MY_VENDOR2:12"),
])
def test_parse_and_canonical_str(text, kind, index, canonical):
    s = DeviceSpec.parse(text)
    assert (s.kind, s.index) == (kind, index)
    assert str(s) == canonical
    assert DeviceSpec.parse(canonical) == s


@pytest.mark.parametrize("bad", ["", ":1", "cuda:", "cuda:-1", "cuda:x", "2cuda", "cu da", "cuda:1:2", "cuda-1"])
def test_bad_strings_are_clear_value_errors(bad):
    with pytest.raises(ValueError, match="device spec|device kind"):
        DeviceSpec.parse(bad)


def test_constructor_normalizes_and_validates():
    assert DeviceSpec("cuda", 2) == DeviceSpec("CUDA", 2)
    assert hash(DeviceSpec("cuda")) == hash(DeviceSpec.parse("CUDA:0"))
    with pytest.raises(ValueError, match=">= 0"):
        DeviceSpec("CUDA", -1)
    with pytest.raises(TypeError):
        DeviceSpec("CUDA", "1")
    with pytest.raises(TypeError):
        DeviceSpec.parse(3)


def test_frozen():
    s = DeviceSpec("CPU")
    with pytest.raises(AttributeError):
        s.index = 2


@given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True), st.integers(0, 10**6))
def test_roundtrip(kind, index):
    s = DeviceSpec(kind, index)
    assert DeviceSpec.parse(str(s)) == s
    assert DeviceSpec.parse(f"{kind.lower()}:{index}") == s
