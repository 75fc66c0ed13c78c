"""The stores of the memory filter: one module per backend, each with its ``StoreSpec``,
opened by URL through the specs' ``schemes`` (this package's and other plugins')."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from beamfilter_core import BuildContext, StoreSpec, mask_credentials
from beamfilter_core.errors import ConfigError, UnknownNameError

from . import _memory, _postgres, _redis, _sqlite
from ._base import ChatStore

#: The stores of this package, one spec per backend module.
STORE_SPECS: tuple[StoreSpec, ...] = (_memory.SPEC, _sqlite.SPEC, _postgres.SPEC, _redis.SPEC)
_BY_SCHEME: dict[str, StoreSpec] = {scheme: spec for spec in STORE_SPECS for scheme in spec.schemes}


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def store_spec(url: str, registry: Any = None) -> StoreSpec:
    """The spec whose ``schemes`` hold the URL's scheme: from ``registry`` when given (a
    config's plugins), else this package's stores, then every installed plugin's."""
    if registry is not None:
        return registry.get_store(url).spec  # type: ignore[no-any-return]
    scheme = _scheme(url)
    spec = _BY_SCHEME.get(scheme)
    if spec is not None:
        return spec
    from beamfilter_core import Registry

    installed = Registry(strict=False)
    try:
        return installed.get_store(url).spec
    except UnknownNameError:
        known = [*_BY_SCHEME, *(s for r in installed.stores() for s in r.spec.schemes if s not in _BY_SCHEME)]
        examples = ", ".join(f"{s}://" for s in known)
        msg = f"No memory store for the URL {mask_credentials(url)!r} (scheme {scheme!r}); use one of: {examples}."
        raise ConfigError(msg) from None


def open_store(url: str, *, registry: Any = None, **options: Any) -> ChatStore:
    """Build the store a URL names; nothing connects until the store is first used.

    ``memory://`` (in-process), ``sqlite:///path.db`` (the embedded default),
    ``postgresql://...``, ``redis://...``, or the scheme of a store another plugin
    registers (a ``StoreSpec``). ``options`` go to the store (e.g. ``ttl=3600`` for
    Redis, ``max_size=20`` for PostgreSQL); ``registry`` is where other plugins' stores
    are looked up (default: the installed plugins).

    Example::

        store = open_store("sqlite:///chats.db")
    """
    if not isinstance(url, str):
        msg = f"open_store(url={url!r}) needs a URL str such as 'sqlite:///chats.db' or 'memory://'."
        raise ConfigError(msg)
    spec = store_spec(url, registry)
    try:
        return spec.factory(url, **options)  # type: ignore[no-any-return]
    except TypeError as exc:  # an option the store does not take
        shown = mask_credentials(url)
        msg = f"open_store({shown!r}) got options it does not accept ({', '.join(sorted(options))}): {exc}"
        raise ConfigError(msg) from exc


def resolve_store(store: Any, build: BuildContext | None, *, owner: str, kind: str, methods: Sequence[str]) -> Any:
    """A filter's ``store`` option: a URL is opened (through the config's registry when the
    kernel is built from a config); an object must have the ``methods`` a ``kind`` has.
    A relative ``sqlite:///`` URL (the default store) is taken from the config file's folder."""
    folder = build.config_dir if build is not None else None
    if isinstance(store, str) and folder and store.startswith("sqlite:///"):
        path = store[len("sqlite:///") :]
        if path and not path.startswith(("/", ":memory:")):
            store = "sqlite:///" + os.path.join(folder, os.path.expanduser(path))
    chosen = (
        open_store(store, registry=build.registry if build is not None else None) if isinstance(store, str) else store
    )
    missing = [name for name in methods if not callable(getattr(chosen, name, None))]
    if missing:
        msg = (
            f"{owner}(store={store!r}) is not a {kind}: it lacks {', '.join(missing)}. "
            "Give a store URL such as 'sqlite:///chats.db' or an object with async " + ", ".join(methods) + "."
        )
        raise ConfigError(msg)
    return chosen


async def migrate(url: str, **options: Any) -> str:
    """Create the tables of the store a URL names, ahead of a deployment (idempotent).

    SQLite and PostgreSQL create their tables; ``memory://`` and Redis need none. Returns
    a one-line description of what was done. This is what ``beamfilter memory migrate URL``
    runs.

    Example::

        asyncio.run(migrate("postgresql://app@db/chats"))
    """
    store = open_store(url, **options)
    try:
        run = getattr(store, "migrate", None)
        created = await run() if run is not None else False
    finally:
        await store.aclose()
    if created is False:
        return f"{store!r}: nothing to migrate (this store has no schema)."
    return f"{store!r}: schema is up to date."
