"""Building durable runners from a beamfilter.toml: ``DurableRunner.from_config`` (worker
or not), a ``[durable] kernel`` that needs no ``[model]`` and is imported from the config's
folder, ``submit`` and its handle, and a waiter woken by the turn rather than by polling;
beamfilter-durable without beamfilter-memory."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from durable._helpers import APP, Local, app_env

from beamfilter_core import ChatRequest, Message, RunFinished, TextDelta
from beamfilter_core.errors import ConfigError, DurableError
from beamfilter_durable import DurableOptions, DurableRunner, QueueOptions, TurnHandle, kernel_from_reference
from beamfilter_durable._config import NamedKernelModel, build_durable_config

pytestmark = pytest.mark.slow

AGENT = '''
from beamfilter_core import Kernel, ScriptedModel


def kernel() -> Kernel:
    """The kernel of this folder's durable turns (not on sys.path: found beside the config)."""
    return Kernel(ScriptedModel(["Answered from {name}."], repeat=True))
'''


def folder_app(local: Local, name: str, *, model: bool = False, queue: bool = False) -> Path:
    """A folder holding ``{name}.py`` (its ``kernel()``) and a beamfilter.toml naming it."""
    folder = local.folder / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(AGENT.format(name=name))
    lines = [
        '[model]\nuse = "scripted"\nscript = ["the file\'s model"]\n' if model else "",
        f'[durable]\nuse = "dbos"\ndatabase = "{local.database}"\nkernel = "{name}:kernel"\n',
        'queue = { name = "folder-turns" }\n' if queue else "",
    ]
    config = folder / "beamfilter.toml"
    config.write_text("\n".join(lines))
    return config


def test_a_named_kernel_needs_no_model_and_is_imported_from_the_config_folder(local: Local) -> None:
    config = folder_app(local, "folder_agent_a")
    assert "folder_agent_a" not in sys.modules
    runner = DurableRunner.from_config(config)
    assert (runner.reference, runner.folder, runner.worker) == ("folder_agent_a:kernel", str(config.parent), True)
    assert runner.options == DurableOptions(database=local.database, kernel="folder_agent_a:kernel")
    result = local.call(runner.run("hi", turn_id="folder-a"))
    assert (result.status, result.text) == ("completed", "Answered from folder_agent_a.")
    # imported with the folder on the path while importing, not left there
    assert str(config.parent) not in sys.path
    assert sys.modules["folder_agent_a"].__file__ == str(config.parent / "folder_agent_a.py")


def test_the_config_kernel_of_a_named_kernel_refuses_to_answer(local: Local) -> None:
    config = folder_app(local, "folder_agent_b")
    built = build_durable_config(config)
    model = built.kernel.model
    assert isinstance(model, NamedKernelModel)
    assert repr(model) == "NamedKernelModel('folder_agent_b:kernel')"
    message = (
        "This config has no [model]: its durable turns run on the kernel [durable] kernel names "
        "('folder_agent_b:kernel'); run them through the durable runner, or add a [model] table."
    )
    request = ChatRequest(messages=(Message("user", "hi"),))
    with pytest.raises(ConfigError) as complete:
        asyncio.run(model.complete(request))
    with pytest.raises(ConfigError) as stream:
        asyncio.run(model.stream(request, print))
    assert str(complete.value) == str(stream.value) == message
    # a config that names no kernel still needs its [model]
    plain = local.folder / "no-model.toml"
    plain.write_text(f'[durable]\nuse = "dbos"\ndatabase = "{local.database}"\n')
    with pytest.raises(ConfigError) as caught:
        DurableRunner.from_config(plain)
    assert caught.value.problems == (
        'model: missing; add a [model] table, e.g. [model] use = "openai" model = "gpt-4o-mini".',
    )
    # a [model] given with a named kernel is kept (the file's own kernel answers with it)
    both = folder_app(local, "folder_agent_c", model=True)
    assert type(build_durable_config(both).kernel.model).__name__ == "ScriptedModel"


def test_from_config_refuses_a_file_without_a_durable_section(local: Local) -> None:
    config = local.folder / "plain.toml"
    config.write_text('[model]\nuse = "scripted"\nscript = ["x"]\n')
    with pytest.raises(ConfigError) as caught:
        DurableRunner.from_config(config, worker=False)
    assert str(caught.value) == f'{config} has no [durable] section; add one, e.g. [durable] use = "dbos".'
    with pytest.raises(ConfigError, match=r"^The config file '/nowhere/beamfilter.toml' does not exist\.$"):
        DurableRunner.from_config("/nowhere/beamfilter.toml")


def test_a_kernel_module_missing_from_the_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        kernel_from_reference("no_such_agent_module:kernel", str(tmp_path))
    assert str(caught.value) == (
        f"The durable config reference 'no_such_agent_module:kernel' cannot be imported (looked in {tmp_path} "
        "and on sys.path): ModuleNotFoundError: No module named 'no_such_agent_module'."
    )
    assert str(tmp_path) not in sys.path
    with pytest.raises(ConfigError) as missing:
        kernel_from_reference("json:no_kernel_here")
    assert str(missing.value) == (
        "The durable config reference 'json:no_kernel_here' cannot be imported: "
        "AttributeError: module 'json' has no attribute 'no_kernel_here'."
    )


def test_a_non_worker_runner_from_config_submits_and_runs_nothing_itself(local: Local) -> None:
    assert local.runner.runtime.backend.launched  # the engine's tables exist: a client creates none
    config = folder_app(local, "folder_agent_d", queue=True)
    client = DurableRunner.from_config(config, worker=False, executor_id="ignored-by-a-client")
    assert client.options.queue == QueueOptions("folder-turns")
    assert client.options.executor_id == "ignored-by-a-client"
    with pytest.raises(DurableError, match=r"^This DurableRunner was made with worker=False"):
        _ = client.runtime
    handle = local.call(client.submit("hi", turn_id="folder-d"))
    assert isinstance(handle, TurnHandle)
    assert (handle.turn_id, repr(handle)) == ("folder-d", "TurnHandle('folder-d')")
    info = local.call(handle.info())
    assert info is not None
    assert (info.status, info.queue) == ("ENQUEUED", "folder-turns")  # no worker listens to that queue
    local.call(handle.cancel())
    with pytest.raises(DurableError, match=r"^The durable turn 'folder-d' was cancelled"):
        local.call(handle.result())
    local.call(client.aclose())


def test_submit_returns_at_once_and_the_handle_decides_and_attaches(local: Local) -> None:
    runner = local.runner
    handle = local.call(runner.submit("turn handled: pay", turn_id="handled", context={"conversation_id": "handled"}))
    assert handle.turn_id == "handled"
    paused = local.call(handle.result())
    assert paused.status == "paused"
    assert local.call(handle.decide({"handled-pay": "approve"})) == "handled:pause-1"
    done = local.call(handle.result(decided="handled:pause-1"))
    assert done.text == "Turn handled is done after 1 tool calls: transferred 5 for handled."

    async def events() -> list[Any]:
        return [event async for event in handle.attach()]

    seen = local.call(events())
    assert seen[:-1] == [TextDelta(done.text)]  # started with run/submit: its text as one event
    assert isinstance(seen[-1], RunFinished)
    assert seen[-1].result == done
    # submitting the same id again starts nothing: the handle of the finished turn
    again = local.call(runner.submit("turn handled: pay", turn_id="handled"))
    assert local.call(again.result()) == done

    second = local.call(runner.submit("turn resumed: pay", turn_id="resumed", context={"conversation_id": "resumed"}))
    # waited for only once it has paused (in this process, before anyone waited)
    deadline = time.monotonic() + 60
    while local.call(second.info()).paused_on != ("resumed-pay",):  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert local.call(second.result()).status == "paused"
    finished = local.call(second.resume({"resumed-pay": "reject"}))
    assert finished.status == "completed"


def test_a_waiting_client_is_woken_by_the_turn_not_by_polling_its_status(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client (worker=False) waits 3 s for a turn run by this process's worker: it reads
    the turn's status once, then the turn's state stream wakes it when the turn ends."""
    monkeypatch.setenv("BF_HOLD_SECONDS", "3")
    assert local.runner.runtime.backend.launched  # the engine's tables exist: a client creates none
    client = DurableRunner(APP, DurableOptions(database=local.database), worker=False)
    sys_db: Any = client.backend.api._sys_db  # type: ignore[union-attr]
    checks: list[float] = []
    original = sys_db.check_workflow_result

    def counted(*args: Any, **kwargs: Any) -> Any:
        checks.append(time.monotonic())
        return original(*args, **kwargs)

    monkeypatch.setattr(sys_db, "check_workflow_result", counted)
    local.call(local.runner.submit("turn waited: hold", turn_id="waited"))
    started = time.monotonic()
    result = local.call(client.result("waited"))
    waited = time.monotonic() - started
    local.call(client.aclose())
    assert result.text == "Turn waited is done after 1 tool calls: held waited."
    # the first status read, then the one after the turn wrote its end (a 0.1 s poll: 30)
    assert len(checks) <= 3, len(checks)
    assert 2.5 < waited < 3 + 1.5, waited


def test_durable_imports_and_loads_without_beamfilter_memory(tmp_path: Path) -> None:
    """beamfilter-durable installed without beamfilter-memory: every module imports, the
    plugin loads, and a memory store asked for anyway is a ConfigError naming the package."""
    script = textwrap.dedent(
        """
        import asyncio, contextlib, importlib, io, json, pkgutil, sys
        sys.modules["beamfilter_memory"] = None  # not installed
        import beamfilter_durable
        from beamfilter_durable import *
        for info in pkgutil.iter_modules(beamfilter_durable.__path__):
            importlib.import_module(f"beamfilter_durable.{info.name}")
        from beamfilter_core._cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            main(["plugins", "--json"])
        status = {p["name"]: p["status"] for p in json.loads(out.getvalue())["plugins"]}
        memory = sys.modules.get("beamfilter_memory")
        print(json.dumps({"durable": status["durable"], "memory_loaded": memory is not None}))
        from beamfilter_durable._store import DurableStore

        class Backend:
            def current_turn(self):
                return None

        from beamfilter_core.errors import ConfigError
        try:
            asyncio.run(DurableStore(object(), Backend()).append("c", []))
        except ConfigError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert json.loads(first) == {"durable": "loaded", "memory_loaded": False}
    assert second == (
        "A durable turn with the memory filter needs beamfilter-memory, which is not installed "
        "(import of beamfilter_memory halted; None in sys.modules); install it: pip install beamfilter-memory."
    )


def test_a_worker_process_imports_the_kernel_from_its_config_folder(local: Local) -> None:
    """`beamfilter durable worker` on a config without [model] whose kernel module sits
    beside it (the worker's current folder is elsewhere)."""
    from durable._crash import Cluster

    config = folder_app(local, "folder_agent_e", queue=True)
    client = DurableRunner.from_config(config, worker=False)
    workers = Cluster(config, app_env(local.ledger), local.folder)
    try:
        workers.start("folder-worker")
        handle = local.call(client.submit("hi", turn_id="folder-e"))
        result = local.call(handle.result())
    finally:
        workers.stop()
        local.call(client.aclose())
    assert result.text == "Answered from folder_agent_e."


def test_references_of_files_and_of_objects(tmp_path: Path) -> None:
    config = tmp_path / "app.toml"
    config.write_text('[model]\nuse = "scripted"\nscript = ["From the file."]\n')
    runner = DurableRunner(config, DurableOptions(database="sqlite:///x.db"), worker=False)
    assert (runner.reference, runner.folder) == (str(config), str(tmp_path))
    assert repr(runner) == f"DurableRunner({str(config)!r}, dbos, 'sqlite:///x.db')"
    assert kernel_from_reference(str(config)).run_sync("hi").text == "From the file."
    by_name = DurableRunner(APP, DurableOptions(), worker=False)
    assert (by_name.reference, by_name.folder) == (APP, None)
    with pytest.raises(ConfigError) as caught:
        kernel_from_reference("os:sep")
    assert str(caught.value) == "The durable config reference 'os:sep' gave '/'; it must name a Kernel or return one."


def test_turn_ids_given_and_drawn() -> None:
    runner = DurableRunner(APP, DurableOptions(), worker=False)
    for bad in ("", "x" * 201, 7):
        with pytest.raises(DurableError) as caught:
            asyncio.run(runner.turn_id_for(None, bad))  # type: ignore[arg-type]
        assert str(caught.value) == (f"turn_id={bad!r} is invalid; give a non-empty string of at most 200 characters.")
    drawn = asyncio.run(runner.turn_id_for({}))
    assert (drawn[:5], len(drawn)) == ("turn-", 37)


def test_the_memory_marker_is_looked_up_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from beamfilter_durable._store import keep_pause

    memory = pytest.importorskip("beamfilter_memory")
    assert keep_pause() is memory.KEEP_PAUSE
    monkeypatch.setitem(sys.modules, "beamfilter_memory", None)
    with pytest.raises(ConfigError) as caught:
        keep_pause()
    assert str(caught.value) == (
        "A durable turn with the memory filter needs beamfilter-memory, which is not installed "
        "(import of beamfilter_memory halted; None in sys.modules); install it: pip install beamfilter-memory."
    )


def test_an_unreachable_database_is_a_durable_error_without_its_password() -> None:
    client = DurableRunner(APP, DurableOptions(database="postgresql://app:s3cret@127.0.0.1:1/turns"), worker=False)
    with pytest.raises(DurableError) as caught:
        asyncio.run(client.info("any"))
    message = str(caught.value)
    assert message.startswith(
        "The durable database 'postgresql://app:***@127.0.0.1:1/turns' cannot be reached: OperationalError: "
    )
    assert message.endswith("; check [durable] database.")
    assert "s3cret" not in message


def test_beamfilter_run_needs_no_model_when_the_kernel_is_named(local: Local) -> None:
    from beamfilter_core import build_config

    config = folder_app(local, "folder_agent_f")
    assert isinstance(build_config(config).kernel.model, NamedKernelModel)
    done = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "run", str(config), "hi"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=local.folder,
        env=app_env(local.ledger),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Answered from folder_agent_f.\n"


def test_the_default_database_lies_beside_the_config_not_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beamfilter_durable._config import durable_options

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "beamfilter.toml").write_text(
        '[model]\nuse = "scripted"\nscript = ["hi"]\n\n[durable]\nuse = "dbos"\n', encoding="utf-8"
    )
    (folder / "named.toml").write_text(
        '[model]\nuse = "scripted"\nscript = ["hi"]\n\n[durable]\nuse = "dbos"\ndatabase = "sqlite:///data/turns.db"\n',
        encoding="utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    built = build_durable_config(folder / "beamfilter.toml")
    assert durable_options(built).database == f"sqlite:///{folder}/beamfilter-durable.db"
    named = build_durable_config(folder / "named.toml")
    assert durable_options(named).database == f"sqlite:///{folder}/data/turns.db"
