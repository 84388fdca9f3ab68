"""devicekit's conformance kit for device plugins, shipped as a pytest plugin (entry point `pytest11: devicekit`).

    pytest --pyargs devicekit.testing --devicekit-device=ACME

runs every `test_conformance_*` module of this package against that device. Without `--devicekit-device` the kit's
tests are skipped and the plugin changes nothing in other test runs. `random_kernels` and `conformance` are plain
helpers, usable from a plugin's own tests. See docs/conformance.md.
"""
