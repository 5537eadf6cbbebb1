"""The first admin of a fresh server, seeded by ``yuxi.user_seed_admin``."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import AsyncConnection

from tests.integration.racing import failures, race, successes
from yuxi.queue.errors import InvalidInput
from yuxi.queue.users import token_authenticate, user_seed_admin


async def admins(url: str) -> list[tuple[Any, ...]]:
    async with await AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT name FROM yuxi.users WHERE is_admin AND deleted_at IS NULL ORDER BY name"
        )
        return await cur.fetchall()


async def test_concurrent_first_starts_seed_exactly_one_admin(db_url: str) -> None:
    results = await race(db_url, 20, lambda conn, _i: user_seed_admin(conn, "admin"))
    assert not failures(results)
    tokens = [t for t in successes(results) if t is not None]
    assert len(tokens) == 1, results
    assert await admins(db_url) == [("admin",)]
    async with await AsyncConnection.connect(db_url, autocommit=True) as conn:
        user = await token_authenticate(conn, tokens[0])
        assert user is not None and (user.name, user.is_admin) == ("admin", True)
        # a later start finds the admin and creates nobody
        assert await user_seed_admin(conn, "admin") is None
        assert await user_seed_admin(conn, "another") is None
    assert await admins(db_url) == [("admin",)]


async def test_a_non_admin_holding_the_name_is_a_clear_refusal(db_url: str) -> None:
    async with await AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("INSERT INTO yuxi.users (name) VALUES ('admin')")
        with pytest.raises(InvalidInput, match="user admin already exists"):
            await user_seed_admin(conn, "admin")
    assert await admins(db_url) == []
