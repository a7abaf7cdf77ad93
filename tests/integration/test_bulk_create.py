"""Creating checks in bulk: a JSON list, one transaction, all or nothing."""

from __future__ import annotations

from tests.conftest import Api


async def _count(api: Api) -> int:
    return len((await api.client.get("/api/v3/checks/", headers=api.headers)).json()["checks"])


async def test_a_list_creates_every_check_in_order(api: Api) -> None:
    r = await api.client.post(
        "/api/v3/channels/", json={"name": "hook", "url": "json://127.0.0.1:9/x"}, headers=api.headers
    )
    channel = r.json()["id"]
    body = [
        {"name": "simple", "timeout": 60, "grace": 5},
        {
            "name": "cron",
            "schedule": "*/5 * * * *",
            "tz": "Europe/Berlin",
            "channels": "*",
            "slug": "cron-job",
        },
        {"name": "tagged", "tags": "a b", "channels": channel},
    ]
    answer = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
    assert answer.status_code == 201, answer.text
    checks = answer.json()["checks"]
    assert [c["name"] for c in checks] == ["simple", "cron", "tagged"]
    assert checks[0]["kind"] == "simple" and checks[0]["timeout"] == 60 and checks[0]["grace"] == 5
    assert (
        checks[1]["kind"] == "cron" and checks[1]["tz"] == "Europe/Berlin" and checks[1]["slug"] == "cron-job"
    )
    assert checks[1]["channels"] == channel and checks[2]["channels"] == channel
    assert checks[2]["tags"] == "a b"
    one = await api.client.get(f"/api/v3/checks/{checks[1]['uuid']}", headers=api.headers)
    assert one.json() == checks[1]
    assert (await api.client.get(f"/ping/{checks[0]['uuid']}")).status_code == 200


async def test_one_bad_check_in_a_list_creates_none_and_names_it(api: Api) -> None:
    body = [{"name": "fine"}, {"name": "bad", "schedule": "61 * * * *"}]
    answer = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("[1].schedule: "), answer.json()
    twice = [{"name": "a", "slug": "same"}, {"name": "c"}, {"name": "b", "slug": "same"}]
    answer = await api.client.post("/api/v3/checks/", json=twice, headers=api.headers)
    assert answer.status_code == 409
    assert answer.json() == {"error": "[2].slug: 'same' is also the slug of [0]"}
    answer = await api.client.post("/api/v3/checks/", json=[], headers=api.headers)
    assert answer.status_code == 400 and answer.json()["error"].startswith("body: ")
    answer = await api.client.post(
        "/api/v3/checks/", json=[{"name": "a"}, {"name": "b"}, 5], headers=api.headers
    )
    assert answer.status_code == 400
    assert answer.json() == {"error": "[2]: must be a JSON object (a check), got int"}
    answer = await api.client.post("/api/v3/checks/", json=[{"name": "x"}] * 1001, headers=api.headers)
    assert answer.status_code == 400 and answer.json()["error"].startswith("checks: ")
    answer = await api.client.post(
        "/api/v3/checks/", json=[{"name": "u", "unique": ["name"]}], headers=api.headers
    )
    assert answer.status_code == 400 and answer.json()["error"].startswith("[0].unique: ")
    assert await _count(api) == 0
    taken = await api.client.post("/api/v3/checks/", json={"name": "t", "slug": "taken"}, headers=api.headers)
    assert taken.status_code == 201
    clash = [{"name": "a", "slug": "free"}, {"name": "b", "slug": "taken"}]
    answer = await api.client.post("/api/v3/checks/", json=clash, headers=api.headers)
    assert answer.status_code == 409
    assert answer.json() == {"error": "[1].slug: 'taken' is already used by another check in this project"}
    assert await _count(api) == 1


async def test_a_list_is_refused_for_a_read_only_key(api: Api) -> None:
    answer = await api.client.post("/api/v3/checks/", json=[{"name": "x"}], headers=api.ro_headers)
    assert answer.status_code == 403


async def test_a_list_maps_the_deprecated_subject_fields_as_a_single_create_does(api: Api) -> None:
    body = [{"name": "old", "subject": "SUCCESS", "subject_fail": "FAILURE"}, {"name": "new"}]
    answer = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
    assert answer.status_code == 201, answer.text
    old, new = answer.json()["checks"]
    assert (old["success_kw"], old["failure_kw"], old["filter_subject"]) == ("SUCCESS", "FAILURE", True)
    assert (new["success_kw"], new["failure_kw"], new["filter_subject"]) == ("", "", False)


async def test_a_schedule_repeated_in_a_list_is_judged_with_its_own_dialect_and_zone(api: Api) -> None:
    # the list judges each distinct (schedule, dialect, zone) once: a repeat with another
    # dialect or zone is still judged, and its error names its own index
    seconds = {"schedule": "*/5 * * * * *", "dialect": "seconds"}
    body = [seconds, seconds, {"schedule": "*/5 * * * * *"}]
    answer = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
    assert answer.status_code == 400 and answer.json()["error"].startswith("[2].schedule: "), answer.text
    berlin = {"schedule": "0 * * * *", "tz": "Europe/Berlin"}
    body = [berlin, berlin, {"schedule": "0 * * * *", "tz": "Mars/Olympus"}]
    answer = await api.client.post("/api/v3/checks/", json=body, headers=api.headers)
    assert answer.status_code == 400 and answer.json()["error"].startswith("[2].tz: "), answer.text
    answer = await api.client.post("/api/v3/checks/", json=[seconds, berlin, seconds], headers=api.headers)
    assert answer.status_code == 201
    assert [c["schedule"] for c in answer.json()["checks"]] == ["*/5 * * * * *", "0 * * * *", "*/5 * * * * *"]
    assert await _count(api) == 3
