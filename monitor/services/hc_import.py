"""``monitor import-healthchecks``: copy checks from a running Healthchecks instance.

Reads the source through Healthchecks' v3 management API (``GET /api/v3/checks/`` and
``/api/v3/channels/`` with its read-write key) and writes through ours (``POST
/api/v3/checks/`` with ``unique: ["slug"]``), so running it twice updates the same checks
instead of creating new ones. What is carried over: name, slug, tags, description, the
schedule (``timeout``, or ``schedule`` + ``tz``, with the dialect its form implies), grace,
``manual_resume``, ``methods``, the keyword filter fields when this monitor accepts them, the
paused state, and channels by name. Everything else is reported, one line each.

Healthchecks' API gives a channel's id, name and kind but never its settings (addresses,
tokens), so a channel cannot be recreated from it: a check's channel is attached to the
monitor's channel of the same name, and a missing one is reported with the Apprise scheme
that serves the same kind (create it, then run the import again).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from monitor.services.channels import HEALTHCHECKS_KINDS
from monitor.services.checks import slugify

FILTER_FIELDS = (
    "filter_subject",
    "filter_body",
    "filter_http_body",
    "filter_default_fail",
    "start_kw",
    "success_kw",
    "failure_kw",
)
COPIED = ("name", "tags", "desc", "grace", "manual_resume", "methods")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class HealthchecksImportError(Exception):
    """The source or the target could not be read or written at all (exit status 2)."""


@dataclass(kw_only=True, slots=True)
class Report:
    """What one import did: checks created and updated (by slug), and what it could not carry."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as text lines: a summary, then one line per thing not carried over."""
        out = [
            f"imported {len(self.created) + len(self.updated)} checks "
            f"({len(self.created)} created, {len(self.updated)} updated), {len(self.skipped)} skipped"
        ]
        out += [f"not carried over: {note}" for note in self.notes]
        return out


def apprise_schemes_for(kind: str) -> list[str]:
    """Apprise URL schemes that serve Healthchecks' integration ``kind`` (``email`` → mailto, mailtos)."""
    return sorted(scheme for scheme, hc_kind in HEALTHCHECKS_KINDS.items() if hc_kind == kind)


def source_dialect(schedule: str) -> str:
    """Healthchecks' rule for a schedule's kind (``guess_kind``): one line of exactly five fields
    is cron (our ``unix`` dialect), anything else OnCalendar."""
    return "unix" if "\n" not in schedule.strip() and len(schedule.split()) == 5 else "oncalendar"


def translate(
    check: Mapping[str, Any], *, slug: str, channel_names: Mapping[str, str], target_channels: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """Our create body for one Healthchecks check, and the notes on what it leaves out.

    Args:
        check: the check as Healthchecks' ``GET /api/v3/checks/`` lists it (read-write key).
        slug: the slug to upsert by (the source's, or one derived from the name).
        channel_names: source channel id → name.
        target_channels: the names of this monitor's channels in the target project.
    """
    label = f"check {check.get('name') or slug!r}"
    notes: list[str] = []
    body: dict[str, Any] = {k: check[k] for k in COPIED if k in check and check[k] is not None}
    body["slug"] = slug
    body["unique"] = ["slug"]
    if check.get("schedule"):
        body["schedule"] = check["schedule"]
        body["tz"] = check.get("tz") or "UTC"
        body["dialect"] = source_dialect(check["schedule"])
    elif check.get("timeout") is not None:
        body["timeout"] = check["timeout"]
    for name in FILTER_FIELDS:
        if name in check:
            body[name] = check[name]
    attached: list[str] = []
    for channel_id in [c for c in str(check.get("channels") or "").split(",") if c]:
        name = channel_names.get(channel_id, "")
        if name and name in target_channels:
            attached.append(name)
        else:
            notes.append(f"{label}: channel {name or channel_id!r} has no channel of that name here")
    body["channels"] = ",".join(attached)
    return body, notes


class Importer:
    """Copies checks from a Healthchecks v3 API (``source``) to ours (``target``).

    Args:
        source: an httpx client whose base URL is the Healthchecks instance and which sends its
            read-write ``X-Api-Key``.
        target: likewise for this monitor (its project's read-write key).
    """

    def __init__(self, source: httpx.Client, target: httpx.Client) -> None:
        self.source = source
        self.target = target

    def _get(self, client: httpx.Client, path: str, what: str) -> Any:
        try:
            response = client.get(path)
        except httpx.HTTPError as error:
            raise HealthchecksImportError(f"{what}: {client.base_url}{path}: {error}") from None
        if response.status_code != 200:
            raise HealthchecksImportError(
                f"{what}: {client.base_url}{path} answered {response.status_code}: {response.text[:200]}"
            )
        try:
            return response.json()
        except ValueError:
            raise HealthchecksImportError(f"{what}: {client.base_url}{path} did not answer JSON") from None

    def run(self, *, say: Callable[[str], None] = lambda _: None) -> Report:
        """Import every check of the source project.

        Raises:
            HealthchecksImportError: a listing could not be read (source or target), or a write failed in a
                way that is not about one check (401, 5xx).
        """
        report = Report()
        checks = self._get(self.source, "/api/v3/checks/", "source checks")["checks"]
        source_channels = self._get(self.source, "/api/v3/channels/", "source channels")["channels"]
        target_channels = {
            c["name"] for c in self._get(self.target, "/api/v3/channels/", "target channels")["channels"]
        }
        channel_names = {c["id"]: c["name"] for c in source_channels}
        for channel in source_channels:
            if channel["name"] not in target_channels:
                schemes = apprise_schemes_for(channel.get("kind", ""))
                hint = (
                    f" (Apprise: {', '.join(s + '://' for s in schemes)})" if schemes else " (an Apprise URL)"
                )
                report.notes.append(
                    f"channel {channel['name']!r} (kind {channel.get('kind')}): its settings are not in "
                    f"Healthchecks' API; create a channel of that name here{hint} and import again"
                )
        used: set[str] = set()
        for check in checks:
            slug = self._slug(check, used)
            body, notes = translate(
                check, slug=slug, channel_names=channel_names, target_channels=target_channels
            )
            report.notes += notes
            result = self._write(body, report)
            if result is None:
                continue
            created, written = result
            (report.created if created else report.updated).append(slug)
            for name in FILTER_FIELDS:
                if name in body and name not in written:
                    report.notes.append(f"check {slug!r}: {name} (this monitor has no such field)")
            if check.get("status") == "paused" and written.get("status") != "paused":
                self._pause(written, slug, report)
            say(f"{'created' if created else 'updated'} {slug}")
        return report

    @staticmethod
    def _slug(check: Mapping[str, Any], used: set[str]) -> str:
        slug = str(check.get("slug") or "") or slugify(str(check.get("name") or ""))
        if not slug:
            found = UUID.search(str(check.get("ping_url") or check.get("uuid") or ""))
            slug = f"check-{found.group(0)[:8]}" if found else "check"
        base, n = slug, 2
        while slug in used:  # two source checks with one slug (Healthchecks allows it)
            slug = f"{base}-{n}"
            n += 1
        used.add(slug)
        return slug

    def _write(self, body: dict[str, Any], report: Report) -> tuple[bool, dict[str, Any]] | None:
        try:
            response = self.target.post("/api/v3/checks/", json=body)
        except httpx.HTTPError as error:
            raise HealthchecksImportError(f"target: {self.target.base_url}/api/v3/checks/: {error}") from None
        if response.status_code in (200, 201):
            return response.status_code == 201, dict(response.json())
        if response.status_code in (400, 409):
            problem = str(response.json().get("error", response.text) if response.content else response.text)
            if body.get("dialect") == "oncalendar" and problem.startswith("dialect"):
                report.notes.append(
                    f"check {body['slug']!r}: OnCalendar schedule {body['schedule']!r} ({problem})"
                )
            else:
                report.notes.append(f"check {body['slug']!r}: refused ({problem})")
            report.skipped.append(body["slug"])
            return None
        raise HealthchecksImportError(
            f"target: POST /api/v3/checks/ answered {response.status_code}: {response.text[:200]}"
        )

    def _pause(self, written: Mapping[str, Any], slug: str, report: Report) -> None:
        response = self.target.post(f"/api/v3/checks/{written['uuid']}/pause")
        if response.status_code != 200:
            report.notes.append(f"check {slug!r}: paused state ({response.status_code})")


def run_import(
    *, source_url: str, source_key: str, target_url: str, target_key: str, say: Callable[[str], None]
) -> Report:
    """Import from the Healthchecks instance at ``source_url`` (its site root; a trailing
    ``/api/v3`` is dropped) into this monitor at ``target_url``.

    Raises:
        HealthchecksImportError: as :meth:`Importer.run`.
    """
    source_url = re.sub(r"/api(/v\d)?/?$", "", source_url.rstrip("/"))  # ".../api/v3/" given: the same
    with (
        httpx.Client(base_url=source_url, headers={"X-Api-Key": source_key}, timeout=30) as source,
        httpx.Client(
            base_url=target_url.rstrip("/"), headers={"X-Api-Key": target_key}, timeout=30
        ) as target,
    ):
        return Importer(source, target).run(say=say)
