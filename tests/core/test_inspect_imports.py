"""The import policy of an inspect-only build (``beamfilter chain``): the modules a config
names are not imported but stood in for, listed in order, and calling a stand-in fails
with a typed error saying why."""

from __future__ import annotations

import json

import pytest

from beamfilter_core._imports import NotImported, config_import, import_policy
from beamfilter_core.errors import ConfigError


def test_an_inspect_only_build_stands_in_for_the_modules_a_config_names() -> None:
    with import_policy(inspect_only=True) as policy:
        shop = config_import("shop_never_installed")
        with import_policy() as inner:  # a config built inside stays inspect-only, on the same list
            config_import("billing_never_installed")
    assert inner.inspect_only is True
    assert policy.skipped == ["shop_never_installed", "billing_never_installed"]
    assert isinstance(shop, NotImported)
    refund = shop.tools.refund
    assert repr(refund) == "<not imported: shop_never_installed.tools.refund>"
    with pytest.raises(ConfigError) as refused:
        refund(order=7)
    assert str(refused.value) == (
        "shop_never_installed.tools.refund was not imported: this kernel was built for inspection only "
        "(beamfilter chain)."
    )
    with pytest.raises(AttributeError):
        _ = shop.__wrapped__  # dunders are not stood in for: inspect and copy see a plain object


def test_outside_an_inspect_only_policy_the_module_is_imported() -> None:
    assert config_import("json") is json
    with import_policy(inspect_only=True), import_policy(inspect_only=False) as real:
        assert config_import("json") is json
    assert real.skipped == []
    with pytest.raises(ModuleNotFoundError):
        config_import("shop_never_installed")
