"""pytest plugin of beamfilter-core: fixtures for testing filters and kernels."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from .._kernel import Kernel
from .._models._scripted import ScriptedModel, ScriptItem


@pytest.fixture
def scripted_model() -> Callable[..., ScriptedModel]:
    """A factory: ``scripted_model(["answer", ...], chunk=None)`` returns a new ScriptedModel."""

    def make(script: Iterable[ScriptItem], **options: Any) -> ScriptedModel:
        return ScriptedModel(script, **options)

    return make


@pytest.fixture
def make_kernel() -> Callable[..., Kernel]:
    """A factory: ``make_kernel(script_or_model, tools=..., filters=..., **kernel_options)``.

    A list (or tuple) as first argument is wrapped in a ScriptedModel. Kernels made here
    check what every filter layer returns (``check_returns=True``) unless told otherwise,
    so a filter returning the wrong type is named in the error.
    """

    def make(model: Any, **options: Any) -> Kernel:
        if isinstance(model, list | tuple):
            model = ScriptedModel(model)
        options.setdefault("check_returns", True)
        return Kernel(model, **options)

    return make
