"""The benchmark tools of `devicekit bench` and bench/*.py: tool code, imported by nothing below the tools layer.

- `definition`: the one benchmark definition (cases at three sizes, inputs, numpy versions, tolerances, the timing
  rule, the run on devices);
- `report`: `devicekit bench`'s table, bar chart and progress bar;
- `peers`, `numba_versions`: the peer columns (numba, torch eager, torch.compile, jax.jit), each checked against numpy;
- `devices`: the OPENCL/WEBGPU columns' hardware, or why there is none;
- `machine`: the machine's state (CPU model, load, thread pools) and the busy warning.

Imports nothing itself, so `from devicekit.bench import machine` costs only that module."""
