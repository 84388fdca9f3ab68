"""The reference PYTHON device: a numpy interpreter of the kernel IR. Every backend is tested against it."""
