from devicekit_cpu.c_renderer import CRenderer


class TinyRenderer(CRenderer):
    device = "TINY"  # ProgramSpec.device: the compile cache keys TINY's bytes apart from CPU's
