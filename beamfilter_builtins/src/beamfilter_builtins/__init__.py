"""beamfilter-builtins: the built-in filters, registered through the ``beamfilter`` entry point group."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
