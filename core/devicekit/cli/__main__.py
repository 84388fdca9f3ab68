"""`python -m devicekit.cli`: the same as the `devicekit` console script."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
