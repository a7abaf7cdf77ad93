"""The deployment files, exercised without Docker.

Docker cannot run on these machines, so this module reads ``deploy/compose.yaml`` and starts
each of its monitor services — the same ``command`` with the same ``environment``, as many
processes as its ``deploy.replicas`` — as local processes against a throwaway PostgreSQL
database. Two things differ from a ``docker compose up``, both forced by running on one host:
``MONITOR_DATABASE_URL`` names the throwaway database instead of the ``postgres`` service, and
each API replica gets its own ``MONITOR_PORT``. Variables the compose file interpolates
(``${MONITOR_LEASE_TTL:-10}`` …) are given as an operator's ``.env`` would give them.

Then: the one-shot ``migrate`` exits 0 before anything else starts; a check created through
one API replica and pinged through the other goes missed on a ``seconds`` schedule and
exactly one notification reaches a local receiver; ``/ready`` on both API replicas lists the
same shard leases, all held by the evaluator replicas; the Dockerfile's ``HEALTHCHECK``
command passes against a running API replica. The Dockerfile and the Kubernetes manifests
are checked for what the issue asks of them (multi-stage, non-root, entrypoint, the same
commands as compose).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.process import (
    CRONTAB_CURL,
    REPO_ROOT,
    MonitorProcess,
    checkout_env,
    throwaway_postgres,
    wait_until,
)
from tests.support.receivers import HttpReceiver, free_port

pytestmark = pytest.mark.e2e

COMPOSE = REPO_ROOT / "deploy" / "compose.yaml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
KUBERNETES = REPO_ROOT / "deploy" / "kubernetes"
API_KEY = "deploy-test-key-0123456789"
SHARDS = 8
VARIABLES = {
    # what an operator's .env beside compose.yaml would say for a fast test cluster
    "MONITOR_API_KEY": API_KEY,
    "MONITOR_LEASE_TTL": "1",
    "MONITOR_EVALUATE_INTERVAL": "0.2",
    "MONITOR_SHARDS": str(SHARDS),
    "MONITOR_ALLOW_PRIVATE_TARGETS": "1",
}
SCHEDULE = {"schedule": "*/2 * * * * *", "dialect": "seconds", "grace": 1, "channels": "*"}

_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}")


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose's interpolation for what compose.yaml uses: ``${X}``, ``${X:-d}``, ``${X-d}``, ``$$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, default = match.group("name"), match.group("op"), match.group("default") or ""
        value = variables.get(name)
        if op == ":-" and not value:
            return default
        if op == "-" and value is None:
            return default
        return value or ""

    return _VARIABLE.sub(one, text)


def load_compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def monitor_services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run the monitor image (all but the database)."""
    return {
        name: service
        for name, service in compose["services"].items()
        if "monitor" in str(service.get("image", "")) or "build" in service
    }


def service_env(service: Mapping[str, Any], variables: Mapping[str, str]) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {key: interpolate(str(value), variables) for key, value in raw.items()}


def dockerfile_instruction(name: str) -> list[str]:
    """Every ``NAME …`` instruction of the Dockerfile (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    return [
        line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
        for line in text.splitlines()
        if line.split(None, 1)[:1] == [name]
    ]


def healthcheck_command() -> list[str]:
    (spec,) = dockerfile_instruction("HEALTHCHECK")
    command: list[str] = json.loads(spec.split(" CMD ", 1)[1])
    return command


# ---------------------------------------------------------------- the stack as local processes


@dataclass
class Stack:
    url: str
    directory: Path
    receiver: HttpReceiver
    processes: dict[str, list[MonitorProcess]] = field(default_factory=dict)

    @property
    def apis(self) -> list[MonitorProcess]:
        return self.processes["api"]

    def pids(self, service: str) -> set[int]:
        return {p.proc.pid for p in self.processes[service] if p.proc is not None}

    def close(self) -> None:
        for group in self.processes.values():
            for process in group:
                process.close()

    def describe(self) -> str:
        return "\n".join(
            f"=== {p.out_path.stem}\n{p.describe()}" for group in self.processes.values() for p in group
        )


def start_stack(url: str, directory: Path, receiver: HttpReceiver) -> Stack:
    compose = load_compose()
    services = monitor_services(compose)
    assert set(services) == {"migrate", "api", "evaluator", "notifier"}, sorted(services)
    stack = Stack(url=url, directory=directory, receiver=receiver)
    one_shots = [n for n, s in services.items() if "deploy" not in s and s.get("restart") == "no"]
    assert one_shots == ["migrate"]
    try:
        for name in one_shots:
            env = service_env(services[name], VARIABLES) | {"MONITOR_DATABASE_URL": url}
            done = subprocess.run(
                [sys.executable, "-m", "monitor", *services[name]["command"]],
                env=checkout_env(**env),
                cwd=directory,
                capture_output=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode()
            assert json.loads(done.stdout) == {"migrated": True}
        for name, service in services.items():
            if name in one_shots:
                continue
            # everything long-running waits for the one-shot migration, as compose orders it
            assert service["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
            group = stack.processes.setdefault(name, [])
            for replica in range(int(service["deploy"]["replicas"])):
                env = service_env(service, VARIABLES) | {"MONITOR_DATABASE_URL": url}
                port = 0
                if "serve" in service["command"]:
                    port = free_port()
                    env["MONITOR_PORT"] = str(port)
                group.append(
                    MonitorProcess(
                        [sys.executable, "-m", "monitor", *service["command"]],
                        env=checkout_env(**env),
                        cwd=directory,
                        logs=directory,
                        name=f"{name}-{replica + 1}",
                        port=port,
                    ).start()
                )
        for api in stack.apis:
            api.wait_healthy()
        return stack
    except BaseException:
        stack.close()
        raise


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("deploy")
    with throwaway_postgres("monitor_deploy") as url, HttpReceiver() as receiver:
        stack = start_stack(url, directory, receiver)
        try:
            yield stack
        finally:
            stack.close()


def ready_shards(api: MonitorProcess) -> dict[str, tuple[str, int]]:
    answer = httpx.get(f"{api.base}/ready", timeout=5)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["database"] == "ok" and body["shards"] == SHARDS
    return {
        lease["name"]: (lease["holder"], lease["token"])
        for lease in body["leases"]
        if lease["name"].startswith("shard-")
    }


def test_compose_stack_check_created_on_one_replica_pinged_on_the_other_missed_once(stack: Stack) -> None:
    first, second = stack.apis
    headers = {"X-Api-Key": API_KEY}
    with httpx.Client(base_url=first.base, headers=headers, timeout=10) as client:
        channel = client.post("/api/v3/channels/", json={"name": "hook", "url": stack.receiver.url})
        assert channel.status_code == 201, channel.text
        created = client.post("/api/v3/checks/", json={"name": "deployed", **SCHEDULE})
        assert created.status_code == 201, created.text
    uuid = created.json()["uuid"]
    ping = subprocess.run(
        [*CRONTAB_CURL, f"{second.base}/ping/{uuid}"], capture_output=True, timeout=30, check=False
    )
    assert ping.returncode == 0 and ping.stdout == b"OK", ping.stderr.decode()
    with httpx.Client(base_url=second.base, headers=headers, timeout=10) as client:
        seen = client.get(f"/api/v3/checks/{uuid}").json()
        # grace once the next tick (2 s on) passed before this read, as it may on a loaded host
        assert seen["n_pings"] == 1 and seen["status"] in ("up", "grace"), seen

        def missed() -> list[Any]:
            alerts: list[Any] = client.get(f"/api/v3/checks/{uuid}/alerts/").json()["alerts"]
            return [a for a in alerts if a["kind"] == "missed"]

        try:
            wait_until(missed, timeout=15, interval=0.2, what="the missed alert")
            stack.receiver.wait_for_requests(1, timeout=15)
        except (TimeoutError, AssertionError):
            print(stack.describe())
            raise
        time.sleep(2.5)  # more missed ticks and sweeps by four workers: still one alert, one delivery
        alerts = client.get(f"/api/v3/checks/{uuid}/alerts/").json()["alerts"]
    assert [a["kind"] for a in alerts] == ["missed"], alerts
    assert alerts[0]["count"] >= 1
    deliveries = [r.json for r in stack.receiver.requests if r.json.get("check_uuid") == uuid]
    assert len(deliveries) == 1, deliveries
    assert deliveries[0]["kind"] == "missed"


def test_ready_on_both_api_replicas_lists_the_same_shard_leases(stack: Stack) -> None:
    first, second = stack.apis
    evaluators = stack.pids("evaluator")

    def agreed() -> dict[str, tuple[str, int]] | None:
        a, b = ready_shards(first), ready_shards(second)
        holders = {int(holder.rsplit(":", 1)[1]) for holder, _ in a.values() if holder}
        if a == b and len(a) == SHARDS and holders == evaluators:
            return a
        return None

    shards = wait_until(agreed, timeout=15, interval=0.2, what="both replicas listing every shard held")
    assert sorted(shards) == sorted(f"shard-{i}" for i in range(SHARDS))
    per_holder: dict[str, int] = {}
    for holder, token in shards.values():
        assert token >= 1
        per_holder[holder] = per_holder.get(holder, 0) + 1
    assert max(per_holder.values()) <= -(-SHARDS // len(evaluators))  # fair share each
    # API replicas and notifiers hold no lease
    assert not (
        {int(h.rsplit(":", 1)[1]) for h, _ in shards.values()} & (stack.pids("api") | stack.pids("notifier"))
    )
    metrics = httpx.get(f"{second.base}/metrics", timeout=5).text
    assert f"monitor_shards {float(SHARDS)}" in metrics
    assert "monitor_shards_unheld 0.0" in metrics


def test_api_replicas_started_together_create_one_default_project(stack: Stack) -> None:
    import asyncio

    import asyncpg

    async def count() -> int:
        conn = await asyncpg.connect(stack.url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            return int(await conn.fetchval("SELECT count(*) FROM projects"))
        finally:
            await conn.close()

    assert asyncio.run(count()) == 1
    for api in stack.apis:
        assert api.proc is not None and api.proc.poll() is None, api.describe()


def test_dockerfile_healthcheck_command_passes_against_an_api_replica(stack: Stack) -> None:
    command = healthcheck_command()
    assert command[0] == "python"
    for api in stack.apis:
        env = checkout_env(MONITOR_PORT=str(api.port))
        done = subprocess.run(
            [sys.executable, *command[1:]], env=env, capture_output=True, timeout=10, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
    closed = subprocess.run(
        [sys.executable, *command[1:]],
        env=checkout_env(MONITOR_PORT=str(free_port())),
        capture_output=True,
        timeout=10,
        check=False,
    )
    assert closed.returncode != 0  # nothing listening: unhealthy


# ---------------------------------------------------------------- static checks of the files


def test_dockerfile_multi_stage_non_root_monitor_entrypoint() -> None:
    stages = dockerfile_instruction("FROM")
    assert len(stages) >= 2 and " AS build" in stages[0] and " AS runtime" in stages[-1], stages
    assert any("--from=build" in copy for copy in dockerfile_instruction("COPY"))
    (user,) = dockerfile_instruction("USER")
    assert user.split(":")[0] not in ("root", "0")
    assert json.loads(dockerfile_instruction("ENTRYPOINT")[-1]) == ["monitor"]
    assert json.loads(dockerfile_instruction("CMD")[-1]) == ["serve", "--host", "0.0.0.0"]
    check = healthcheck_command()
    assert "curl" not in " ".join(check) and "/health" in check[-1]
    ignored = (REPO_ROOT / ".dockerignore").read_text().split()
    client = "clients/python/monitor_client/"  # shipped inside the monitor wheel
    for needed in ("pyproject.toml", "README.md", "monitor/", "migrations/", client):
        assert f"!{needed}" in ignored  # the build stage sees what the wheel needs


def test_kubernetes_manifests_run_the_compose_commands() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    documents = []
    for resource in kustomization["resources"]:
        documents += [d for d in yaml.safe_load_all((KUBERNETES / resource).read_text()) if d]
    kinds: dict[str, dict[str, Any]] = {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}
    assert {"Deployment/monitor-api", "Deployment/monitor-evaluator", "Deployment/monitor-notifier"} <= set(
        kinds
    )
    assert {"Service/monitor", "Job/monitor-migrate", "ConfigMap/monitor", "Secret/monitor"} <= set(kinds)
    compose = monitor_services(load_compose())
    expected = {
        "Job/monitor-migrate": compose["migrate"]["command"],
        "Deployment/monitor-api": compose["api"]["command"],
        "Deployment/monitor-evaluator": compose["evaluator"]["command"],
        "Deployment/monitor-notifier": compose["notifier"]["command"],
    }
    for key, command in expected.items():
        spec = kinds[key]["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert container["args"] == command, key
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert {ref.get("configMapRef", ref.get("secretRef"))["name"] for ref in container["envFrom"]} == {
            "monitor"
        }
        if key.startswith("Deployment"):
            assert kinds[key]["spec"]["replicas"] == 2
            selector = kinds[key]["spec"]["selector"]["matchLabels"]
            pod_labels = kinds[key]["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= pod_labels.items(), key
    api = kinds["Deployment/monitor-api"]["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert api["livenessProbe"]["httpGet"]["path"] == "/health"
    service = kinds["Service/monitor"]["spec"]
    assert service["selector"] == kinds["Deployment/monitor-api"]["spec"]["selector"]["matchLabels"]
    config = set(kinds["ConfigMap/monitor"]["data"]) | set(kinds["Secret/monitor"]["stringData"])
    compose_env = set(service_env(compose["api"], {}))
    assert compose_env <= config | {"MONITOR_PORT"}, compose_env - config
