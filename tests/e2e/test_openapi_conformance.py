"""The app answers as its own OpenAPI document says, for generated requests at every route.

Schemathesis reads ``/schema/openapi.json`` and sends positive and negative requests in process
through the real ASGI app (its lifespan: migrations, ingest writer; a frozen clock) on SQLite
and PostgreSQL, running every check it has on each answer: no 5xx; status code, content type,
headers and body as declared; valid data accepted, invalid data refused; the API key enforced
where the document requires it (it resends without the key and with a wrong one).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup

from monitor.app import create_app
from monitor.domain.clock import FrozenClock
from monitor.services import projects
from monitor.settings import Settings
from monitor.storage.engine import make_engine, migrate
from tests.conftest import API_KEY, Api

MAX_EXAMPLES = 6

# Every check schemathesis has, but ``max_response_time``: it needs a limit, and none is promised.
load_all_checks()
ALL_CHECKS: list[Callable[..., Any]] = [
    check for check in CHECKS.get_all() if check.__name__ != "max_response_time"
]

CHECK_RULES = ("schedule: ", "tz: ", "channels: ", "escalate_to: ", "min_runtime: ", "escalate_after: ")
"""A check body's rules across fields or rows: a schedule's grammar in its dialect (and one that
ever fires), a zone name, channels that exist, a min_runtime under max_runtime, an escalation
with somewhere to go; in a list, each as ``[<index>].<field>: …``."""

SEMANTIC: dict[str, tuple[str, ...]] = {
    "GET /api/v3/cron/explain": ("schedule: ",),
    "POST /api/v3/checks": CHECK_RULES,
    "POST /api/v3/checks/{uuid}": CHECK_RULES,
    "POST /api/v3/channels": ("url: ",),
    "POST /api/v3/channels/{channel_id}": ("url: ",),
    "POST /api/v3/maintenance": ("schedule: ", "end: ", "duration: ", "check: "),
}
"""Rules no JSON Schema states, per operation: a schema-valid request refused with 400 naming one
of these fields is right (a cron expression's grammar per dialect, an Apprise URL's scheme and
target, an end after its start, a duration shorter than the schedule's gaps, a check that
exists), so ``positive_data_acceptance`` does not count it. Nor, on any list, a refused
``cursor``: only a cursor this server issued is valid, and a generated one never is."""


def _semantic(label: str, failure: BaseException, response: Any) -> bool:
    if type(failure).__name__ != "RejectedPositiveData" or response.status_code != 400:
        return False
    try:
        message = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    if not isinstance(message, str):
        return False
    message = re.sub(r"^\[[0-9]+\]\.", "", message)  # a list's item: "[3].schedule: …"
    return message.startswith(("cursor: ", *SEMANTIC.get(label, ())))


async def _project(database_url: str, now: datetime) -> None:
    engine = make_engine(database_url)
    try:
        await migrate(engine)
        async with engine.begin() as conn:
            await projects.create_project(conn, "conformance", now, api_key=API_KEY)
    finally:
        await engine.dispose()


def _probe(operation: Any, mode: GenerationMode, failures: list[tuple[str, str, str]]) -> int:
    """Send ``operation``'s generated cases in ``mode``; every failed check goes to ``failures``
    as (operation, check names, report with the request to reproduce). Returns how many were sent."""
    label = operation.label
    sent = 0

    @settings(
        max_examples=MAX_EXAMPLES,
        database=None,
        deadline=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def probe(case: Any) -> None:
        nonlocal sent
        sent += 1
        response = case.call()
        try:
            case.validate_response(response, checks=ALL_CHECKS)
        except FailureGroup as group:
            kept = [e for e in group.exceptions if not _semantic(label, e, response)]
            if kept:
                names = ",".join(sorted({type(e).__name__ for e in kept}))
                failures.append((label, names, str(group)[:1500]))
        except AssertionError as error:
            failures.append((label, type(error).__name__, str(error)[:1500]))

    with contextlib.suppress(Unsatisfiable):  # nothing to make negative here
        probe()
    return sent


@pytest.mark.slow
def test_every_answer_conforms_to_the_openapi_document(database_url: str) -> None:
    now = datetime(2026, 7, 18, 2, 0, tzinfo=UTC)
    asyncio.run(_project(database_url, now))
    app_settings = Settings(
        database_url=database_url, allow_private_targets=True, notify_backoff=0.0, notify_timeout=5.0
    )
    app = create_app(app_settings, clock=FrozenClock(now), evaluator=False, notify=False, liveness=False)
    config = SchemathesisConfig.from_dict({"auth": {"openapi": {"apiKey": {"api_key": API_KEY}}}})
    schema = schemathesis.openapi.from_asgi("/schema/openapi.json", app, config=config)
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert {
        "GET /ping/{uuid}",
        "POST /ping/{ping_key}/{slug}/{exit_status}",
        "GET /api/v3/channels",
    } <= labels
    failures: list[tuple[str, str, str]] = []
    sent = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            sent += _probe(operation, mode, failures)
    assert sent > 200
    assert failures == [], "\n\n".join(" | ".join(f) for f in failures)


async def test_a_method_the_path_lacks_is_answered_405_with_allow(api: Api) -> None:
    """RFC 9110 §15.5.6: a 405 names the methods the resource has, in our error body."""
    for path in ("/api/v3/channels/", "/api/v3/cron/explain", "/health"):
        r = await api.client.put(path, headers=api.headers)
        assert r.status_code == 405, (path, r.text)
        assert r.json()["error"].startswith("method: PUT is not allowed"), r.text
        allowed = {m.strip() for m in r.headers["allow"].split(",")}
        assert "GET" in allowed and "PUT" not in allowed, (path, allowed)
    r = await api.client.put(f"/ping/{api.project['ping_key']}/x")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST, HEAD"


async def test_the_document_declares_the_error_body_as_answered(api: Api) -> None:
    document = (await api.client.get("/schema/openapi.json")).json()
    assert document["components"]["schemas"]["ErrorBody"] == {
        "type": "object",
        "properties": {"error": {"type": "string", "description": "`<field>: <problem>`"}},
        "required": ["error"],
        "title": "ErrorBody",
    }
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")) and not path.startswith("/ping/") and path != "/ready":
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    ping = document["paths"]["/ping/{uuid}"]["post"]
    assert set(ping["responses"]) == {"200", "400", "404", "429", "503"}
    assert ping["responses"]["200"]["content"] == {"text/plain": {"schema": {"type": "string"}}}
    assert document["paths"]["/api/v3/channels"]["post"]["security"] == [{"apiKey": []}]
    assert "security" not in document["paths"]["/api/v3/cron/explain"]["get"]
