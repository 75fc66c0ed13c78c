"""``python -m beamfilter_core`` runs the ``beamfilter`` command."""

from __future__ import annotations

import sys

from ._cli import main

sys.exit(main())
