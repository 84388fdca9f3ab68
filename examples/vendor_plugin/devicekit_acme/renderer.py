"""AcmeRenderer: C for ACME. It reuses the CPU plugin's C renderer (itself on the core's CStyleRenderer) and changes
what makes ACME code ACME's: the kind it renders for, the kernel's attributes and the preamble."""

from __future__ import annotations

from devicekit_cpu.c_renderer import CRenderer


class AcmeRenderer(CRenderer):
    """Sources say `ACME_KERNEL` before each entry point; the preamble defines it (exported, hot) and the dialect."""

    device = "ACME"  # ProgramSpec.device: the compile cache keys ACME's bytes apart from CPU's
    lang = "acme-c"
    kernel_prefix = "ACME_KERNEL "

    def render_preamble(self, used) -> str:
        return ('/* ACME C dialect v1 */\n#include <math.h>\n'
                '#define ACME_KERNEL __attribute__((visibility("default"), hot))')

    def parse_source(self, src: str, entry: str, sizes: dict | None = None, split=None):
        """Hand-written ACME C (dev.program_from_source): ACME_KERNEL is defined for the parser and the compiler."""
        if "ACME_KERNEL" in src and "#define ACME_KERNEL" not in src:
            src = '#define ACME_KERNEL __attribute__((visibility("default")))\n' + src
        spec = super().parse_source(src, entry, sizes=sizes, split=split)
        return spec
