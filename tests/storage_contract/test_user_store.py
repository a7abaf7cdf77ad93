"""UserStore (monitor.storage.ports) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.storage.ports import DuplicateKey
from monitor.storage.unit_of_work import UnitOfWork
from tests.storage_contract.conftest import NOW, add_project


async def add_user(uow: UnitOfWork, email: str = "a@example.com") -> int:
    return await uow.users.insert(
        {"email": email, "password_hash": "h", "created_at": NOW, "failed_logins": 0}
    )


async def test_insert_by_email_and_a_taken_email(uow: UnitOfWork) -> None:
    user = await add_user(uow)
    row = await uow.users.by_email("a@example.com")
    assert row is not None and (row["id"], row["failed_logins"], row["tz"]) == (user, 0, "")
    assert await uow.users.by_email("b@example.com") is None
    with pytest.raises(DuplicateKey):
        await add_user(uow)
    assert await uow.users.exists(user)  # the transaction is still usable
    assert not await uow.users.exists(user + 1)


async def test_update_and_delete_with_sessions(uow: UnitOfWork) -> None:
    user = await add_user(uow)
    await uow.users.update(user, {"failed_logins": 3, "locked_until": NOW, "tz": "Europe/Berlin"})
    row = await uow.users.by_email("a@example.com")
    assert row is not None and (row["failed_logins"], row["locked_until"], row["tz"]) == (
        3,
        NOW,
        "Europe/Berlin",
    )
    await uow.users.add_session(
        {"token_hash": "t" * 64, "user_id": user, "csrf_token": "c", "created_at": NOW, "expires_at": NOW}
    )
    await uow.users.delete(user)
    assert not await uow.users.exists(user)
    assert await uow.users.session("t" * 64, NOW - timedelta(days=1)) is None


async def test_sessions_live_until_they_expire_and_end_session_prunes_expired(uow: UnitOfWork) -> None:
    user = await add_user(uow)
    await uow.users.update(user, {"tz": "Asia/Tokyo"})
    for token, expires in (("live", NOW + timedelta(days=1)), ("old", NOW - timedelta(seconds=1))):
        await uow.users.add_session(
            {
                "token_hash": token,
                "user_id": user,
                "csrf_token": f"csrf-{token}",
                "created_at": NOW,
                "expires_at": expires,
            }
        )
    assert await uow.users.session("live", NOW) == (user, "csrf-live", "a@example.com", "Asia/Tokyo")
    assert await uow.users.session("old", NOW) is None
    assert await uow.users.session("live", NOW + timedelta(days=1)) is None  # at expiry: gone
    await uow.users.add_session(
        {
            "token_hash": "other",
            "user_id": user,
            "csrf_token": "x",
            "created_at": NOW,
            "expires_at": NOW + timedelta(days=1),
        }
    )
    await uow.users.end_session("live", NOW)
    assert await uow.users.session("live", NOW) is None
    assert await uow.users.session("other", NOW) is not None
    assert await uow.users.session("old", NOW - timedelta(days=1)) is None  # expired one pruned


async def test_memberships_roles_and_admin_counts(uow: UnitOfWork) -> None:
    a, b = await add_project(uow, "a"), await add_project(uow, "b")
    alice, bob = await add_user(uow, "alice@example.com"), await add_user(uow, "bob@example.com")
    await uow.users.add_memberships(alice, [b, a], admin=True)
    await uow.users.add_memberships(bob, [a], admin=False)
    await uow.users.add_memberships(bob, [], admin=False)
    assert await uow.users.memberships(alice) == [(a, True), (b, True)]
    assert await uow.users.membership(bob, a) is False
    assert await uow.users.membership(bob, b) is None
    assert await uow.users.admins_other_than(a, alice) == 0
    await uow.users.set_admin(bob, a, True)
    assert await uow.users.admins_other_than(a, alice) == 1
    await uow.users.remove_membership(bob, a)
    assert await uow.users.memberships(bob) == []
    assert await uow.users.exists(bob)


async def test_members_are_ordered_by_email_then_project(uow: UnitOfWork) -> None:
    a, b, c = await add_project(uow, "a"), await add_project(uow, "b"), await add_project(uow, "c")
    zed, amy = await add_user(uow, "zed@example.com"), await add_user(uow, "amy@example.com")
    await uow.users.add_memberships(zed, [a], admin=True)
    await uow.users.add_memberships(amy, [b, a], admin=False)
    await uow.users.add_memberships(amy, [c], admin=True)
    assert await uow.users.members([a, b]) == [
        (amy, "amy@example.com", a, False),
        (amy, "amy@example.com", b, False),
        (zed, "zed@example.com", a, True),
    ]
    assert await uow.users.members([]) == []
