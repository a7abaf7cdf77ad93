"""``monitor-run`` reads its command line as its argparse parser does.

The usual spellings are read by hand (argparse is not imported on the fast path); each case
here is read both ways and must give the same check, tick, flags, numbers and command.
"""

from __future__ import annotations

import pytest
from monitor_client import run_command

FIELDS = ("check", "scheduled", "create", "base_url", "timeout", "retries", "command")

SPELLINGS = [
    ["--check", "nightly", "--", "true"],
    ["--check=nightly", "--create", "--", "sh", "-c", "exit 3"],
    ["--check", "nightly", "true", "--check", "other"],
    ["--scheduled", "2026-07-19T03:00:00Z", "--check", "a", "--base-url", "http://m:8000", "--", "ls", "-l"],
    ["--timeout", "2.5", "--retries", "0", "--check", "a", "--", "true"],
    ["--timeout=0.5", "--retries=7", "--check", "a", "true"],
    ["--check", "a", "--create", "--create", "-", "x"],
    ["--check", "a"],
    [],
    ["--chec", "abbreviated", "--", "true"],
    ["--timeout", "-1", "--check", "a", "--", "true"],
    ["--check", "a", "--", "--check", "b"],
]


def _fields(parsed: object) -> tuple[object, ...]:
    return tuple(getattr(parsed, name) for name in FIELDS)


@pytest.mark.parametrize("argv", SPELLINGS, ids=[" ".join(a) or "empty" for a in SPELLINGS])
def test_hand_read_command_line_matches_argparse(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MONITOR_CHECK", raising=False)
    monkeypatch.setenv("MONITOR_TIMEOUT", "4")
    monkeypatch.delenv("MONITOR_RETRIES", raising=False)
    expected = run_command._parser(4.0, 3).parse_args(argv)
    assert _fields(run_command._parse(argv)) == _fields(expected)


def test_check_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_CHECK", "from-env")
    assert run_command._parse(["--", "true"]).check == "from-env"
    assert run_command._parse(["--check", "given", "--", "true"]).check == "given"


@pytest.mark.parametrize("argv", [["--timeout", "abc", "--", "true"], ["--check"], ["--bogus", "--", "true"]])
def test_a_usage_error_exits_2_with_argparse_message(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_command._parse(argv)
    assert exited.value.code == 2
    assert "usage: monitor-run" in capsys.readouterr().err


def test_help_lists_the_options_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run_command._parse(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "--check" in out and "COMMAND" in out
