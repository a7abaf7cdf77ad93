"""The README's five-minute tour, run as written: its ``sh`` blocks are read from README.md (so
this test breaks when the README changes) and executed by bash and the real curl against a real
``monitor serve --dev`` on a temporary SQLite file. The webhook channel points at a local JSON
receiver instead of hooks.example.com; the heartbeat check's ``missed`` alert must reach it."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import REPO_ROOT, MonitorProcess, checkout_env
from tests.support.receivers import HttpReceiver, free_port

pytestmark = pytest.mark.e2e

KEY = "readme-tour-key-0123456789"
README_HOST = "http://127.0.0.1:8000"
README_HOOK = "json://hooks.example.com/monitor"


def tour_section() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## A five-minute tour")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def tour_commands() -> list[str]:
    """Every command of the tour's ``sh`` blocks, continuation lines joined, in order."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", tour_section(), re.S):
        for command in block.replace("\\\n", " ").splitlines():
            if command.strip():
                commands.append(command.strip())
    return commands


def test_the_tour_section_has_the_commands_this_test_runs() -> None:
    commands = tour_commands()
    assert commands[0] == "export KEY=<api_key from above>"
    assert commands[1] == f"API={README_HOST}/api/v3"
    assert any(README_HOOK in c for c in commands)
    assert any("<heartbeat uuid>" in c for c in commands)
    assert any('"name": "heartbeat"' in c and '"channels": "*"' in c for c in commands)


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    port = free_port()
    env = checkout_env(
        MONITOR_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'tour.db'}", MONITOR_API_KEY=KEY
    )
    shell_env = checkout_env()
    with (
        HttpReceiver(path="/monitor") as receiver,
        MonitorProcess.serve(port, env=env, cwd=tmp_path, logs=tmp_path, name="tour") as server,
    ):
        server.wait_healthy()
        banner = re.search(r"```\n(Created the default project[^\n]*)\n", tour_section())
        assert banner is not None and banner.group(1) in server.stdout, server.describe()
        names: dict[str, str] = {}  # placeholder → value learnt from an earlier answer
        answers: list[tuple[str, Any]] = []
        for command in tour_commands():
            command = command.replace(README_HOST, server.base).replace(README_HOOK, receiver.url)
            for placeholder, value in names.items():
                command = command.replace(placeholder, value)
            if command.startswith("export KEY="):
                shell_env["KEY"] = KEY  # the key the server was started with, as the README says
                continue
            assert "<" not in command.split("#")[0], f"unresolved placeholder in {command!r}"
            if assignment := re.fullmatch(r"(\w+)=(\S+)", command):
                shell_env[assignment.group(1)] = assignment.group(2)
                continue
            done = subprocess.run(
                ["bash", "-c", command],
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            answer: Any = done.stdout
            if done.stdout.startswith("{"):
                answer = json.loads(done.stdout)
                assert not answer.get("error"), (command, answer)
                if answer.get("name") == "backup":
                    names["<uuid>"] = answer["uuid"]
                elif answer.get("name") == "heartbeat":
                    names["<heartbeat uuid>"] = answer["uuid"]
                elif str(answer.get("url", "")).startswith("json://") and "id" in answer:
                    names["<channel id>"] = answer["id"]
                    assert set(answer) == {"id", "name", "kind", "url", "kinds", "default"}, answer
                    assert answer["kinds"] == [] and answer["default"] is False
            answers.append((command, answer))

        test_send = next(a for c, a in answers if "/test" in c)
        assert test_send == {"ok": True, "error": None}
        check = next(a for c, a in answers if f"/checks/{names['<uuid>']} -H" in c and " -d " not in c)
        assert check["channels"] != ""  # routed to all channels by the tour's update
        ping = next(a for c, a in answers if "/ping/" in c)
        assert ping == "OK"

        deadline = time.monotonic() + 25
        missed: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not missed:
            payloads = [r.json for r in receiver.requests if r.body.startswith(b"{")]
            missed = [
                p
                for p in payloads
                if p.get("kind") == "missed" and p.get("check_uuid") == names["<heartbeat uuid>"]
            ]
            time.sleep(0.2)
        assert missed, (receiver.requests, server.describe())
        assert missed[0]["title"].startswith("heartbeat")
