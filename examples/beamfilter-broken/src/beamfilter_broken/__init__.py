"""A plugin that fails on import: it needs a module that is not installed."""

from __future__ import annotations

import beamfilter_missing_dependency  # type: ignore[import-not-found]  # noqa: F401  # deliberately missing
