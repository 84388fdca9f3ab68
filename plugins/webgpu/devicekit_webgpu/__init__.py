"""devicekit-webgpu: WebGPU devices for devicekit (WGSL -> wgpu's compiler -> compute pipelines, via wgpu-py)."""

__version__ = "0.1.0"
