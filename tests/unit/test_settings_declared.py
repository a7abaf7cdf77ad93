"""Settings are declared once (monitor/settings.py): the only reader of MONITOR_* variables, the
source of the README's settings table, durations stored in seconds."""

from __future__ import annotations

import ast
import importlib.util
import math
from pathlib import Path

import pytest

from monitor.settings import Settings, SettingsError, read, specs

ROOT = Path(__file__).resolve().parents[2]


def _load_settings_table() -> object:
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "scripts" / "settings_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_settings_table_is_the_generated_one() -> None:
    table = _load_settings_table()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table.rewrite(text) == text, "README.md's settings table is stale: run scripts/settings_table.py"  # type: ignore[attr-defined]


def test_every_setting_is_declared_with_a_monitor_variable_and_a_doc() -> None:
    declared = list(specs())
    assert {s.name for s in declared} >= {"database_url", "lease_ttl", "ingest_wait", "log_level", "roles"}
    assert len({s.env for s in declared}) == len(declared)
    for spec in declared:
        assert spec.env.startswith("MONITOR_") and spec.doc, spec


def test_ingest_wait_keeps_its_millisecond_variable_and_is_stored_in_seconds() -> None:
    assert math.isclose(Settings().ingest_wait, 0.002)
    assert math.isclose(Settings.from_env({"MONITOR_INGEST_WAIT_MS": "25"}).ingest_wait, 0.025)
    with pytest.raises(SettingsError, match="MONITOR_INGEST_WAIT_MS"):
        Settings.from_env({"MONITOR_INGEST_WAIT_MS": "-1"})


def test_the_pre_send_test_hook_is_not_a_production_setting() -> None:
    assert "notify_pre_send_delay" not in {s.name for s in specs()}
    assert not any("PRE_SEND" in s.env for s in specs())


def test_the_pre_spawn_test_hook_is_not_a_production_setting() -> None:
    # the failover tests pass it in process (tests/support/stalling_scheduler.py)
    assert "scheduler_pre_spawn_delay" not in {s.name for s in specs()}
    assert not any("PRE_SPAWN" in s.env for s in specs())
    assert [s.name for s in specs() if "testing aid" in s.doc] == []


def test_read_gives_one_setting_without_validating_the_rest() -> None:
    env = {"MONITOR_LOG_LEVEL": "DEBUG", "MONITOR_LEASE_TTL": "nonsense"}
    assert read("log_level", env) == "DEBUG"
    assert read("base_url", env) == "http://127.0.0.1:8000"
    with pytest.raises(SettingsError, match="MONITOR_LEASE_TTL"):
        read("lease_ttl", env)


def test_port_and_workers_are_bounded() -> None:
    assert Settings.from_env({"MONITOR_PORT": "9000", "MONITOR_WORKERS": "3"}).port == 9000
    with pytest.raises(SettingsError, match="MONITOR_PORT"):
        Settings.from_env({"MONITOR_PORT": "70000"})
    with pytest.raises(SettingsError, match="MONITOR_WORKERS"):
        Settings.from_env({"MONITOR_WORKERS": "0"})


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines reading a ``MONITOR_*`` variable: ``os.environ.get("MONITOR_…")``, ``os.getenv(…)``,
    ``os.environ["MONITOR_…"]`` in a load context, or an f-string key ``f"MONITOR_{…}"``."""

    def monitor_key(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.startswith("MONITOR_")
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            return isinstance(first, ast.Constant) and str(first.value).startswith("MONITOR_")
        return False

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and monitor_key(node.args[0]):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in {"get", "getenv", "pop"}:
                lines.append(node.lineno)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and monitor_key(node.slice):
            lines.append(node.lineno)
    return lines


def test_only_the_settings_module_reads_monitor_variables() -> None:
    offenders = {}
    for path in sorted((ROOT / "monitor").rglob("*.py")):
        if path.name == "settings.py" and path.parent.name == "monitor":
            continue
        lines = _environment_reads(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            offenders[str(path.relative_to(ROOT))] = lines
    assert offenders == {}
