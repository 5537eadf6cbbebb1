"""Shared skills in SQL: versions by content, immutability, the digest SQL computes,
dependency refusals (missing, cycles, racing uploads), sharing and admin-only writes.
Personal skills in the file store: written as a whole in one transaction (a failure
leaves the previous files), read back with the digest of their files, malformed ones
skipped."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.fixtures.skills import SKILLS, skill_md
from tests.integration.conftest import World
from tests.integration.racing import race
from yuxi.files.store import PostgresFileStore
from yuxi.queue.errors import InvalidInput, NotFound, PayloadTooLarge, ReadOnly
from yuxi.queue.skills import (
    skill_add,
    skill_delete,
    skill_files,
    skill_get,
    skill_versions,
    skills_usable,
)
from yuxi.skills.format import bundle, canonical_digest, read_source
from yuxi.skills.store import (
    add_shared_skill,
    place_personal_skill,
    remove_personal_skill,
    user_personal_skills,
)


def files_of(name: str, description: str = "x", **kw: Any) -> dict[str, bytes]:
    return {"SKILL.md": skill_md(name, description, **kw).encode()}


async def add(world: World, name: str, *, uid: Any = None, **kw: Any) -> Any:
    found = bundle(files_of(name, **kw))
    async with world.pool.connection() as conn:
        return await add_shared_skill(conn, uid, found)


async def test_a_version_per_distinct_content_with_the_digest_sql_computes(world: World) -> None:
    found = read_source(SKILLS / "writing-style")
    async with world.pool.connection() as conn:
        first = await add_shared_skill(conn, world.admin, found)
        again = await add_shared_skill(conn, world.admin, found)
        changed = dict(found.files) | {"extra.md": b"more"}
        second = await add_shared_skill(conn, world.admin, bundle(changed))
        versions = await skill_versions(conn, world.alice, "writing-style")
        stored = await skill_files(conn, world.alice, "writing-style", 1)
    assert (first.version, first.created) == (1, True)
    assert (again.version, again.created) == (1, False)  # same files: nothing new
    assert (second.version, second.created) == (2, True)
    assert first.sha256 == found.sha256  # SQL's digest equals the worker's
    assert second.sha256 == canonical_digest(changed)
    assert [v.version for v in versions] == [2, 1]
    assert {f.path: f.content for f in stored} == dict(found.files)


async def test_versions_and_files_are_immutable(world: World) -> None:
    await add(world, "fixed")
    for statement in (
        "UPDATE yuxi.skill_versions SET description = 'changed' WHERE slug = 'fixed'",
        "UPDATE yuxi.skill_versions SET sha256 = repeat('0', 64) WHERE slug = 'fixed'",
        "UPDATE yuxi.skill_files SET content = 'evil' WHERE slug = 'fixed'",
    ):
        with pytest.raises(psycopg.Error, match="immutable") as refused:
            await world.execute(statement)
        assert refused.value.sqlstate == "YT001"
    assert await world.value("SELECT description FROM yuxi.skill_versions") == "x"


async def test_dependencies_must_exist_and_must_not_close_a_cycle(world: World) -> None:
    with pytest.raises(InvalidInput, match="do not exist: base"):
        await add(world, "top", skills=["base"])
    await add(world, "base")
    await add(world, "middle", skills=["base"])
    await add(world, "top", skills=["middle"])
    with pytest.raises(InvalidInput, match="cycle: base -> top -> middle -> base"):
        await add(world, "base", skills=["top"])
    async with world.pool.connection() as conn:
        assert (await skill_get(conn, None, "base")).version == 1  # nothing was written


async def test_racing_uploads_cannot_close_a_cycle_together(world: World) -> None:
    await add(world, "left")
    await add(world, "right")
    found = {
        0: bundle(files_of("left", "now needs right", skills=["right"])),
        1: bundle(files_of("right", "now needs left", skills=["left"])),
    }

    async def upload(conn: Any, i: int) -> Any:
        return await add_shared_skill(conn, None, found[i % 2])

    results = await race(world.url, 2, upload)
    refused = [r for r in results if isinstance(r, InvalidInput)]
    assert len(refused) == 1, results
    assert "cycle" in str(refused[0])


async def test_only_admins_add_and_delete_shared_skills(world: World) -> None:
    with pytest.raises(ReadOnly):
        await add(world, "mine", uid=world.alice)
    await add(world, "mine", uid=world.admin)
    async with world.pool.connection() as conn:
        with pytest.raises(ReadOnly):
            await skill_delete(conn, world.alice, "mine")
        await skill_delete(conn, world.admin, "mine")
        with pytest.raises(NotFound):
            await skill_delete(conn, world.admin, "mine")
    assert await world.value("SELECT count(*) FROM yuxi.skill_files") == 0


async def test_sharing_decides_who_may_use_a_skill(world: World) -> None:
    async with world.pool.connection() as conn:
        for slug, scope, shared in (
            ("everyone", "all", None),
            ("for-bob", "selected", [world.bob]),
            ("admins", "owner", None),
        ):
            await skill_add(
                conn,
                world.admin,
                slug=slug,
                description="x",
                front_matter={},
                files=files_of(slug),
                share_scope=scope,
                shared_with=shared,
            )
        alice = [s.slug for s in await skills_usable(conn, world.alice)]
        bob = [s.slug for s in await skills_usable(conn, world.bob)]
        admin = [s.slug for s in await skills_usable(conn, world.admin)]
        with pytest.raises(NotFound):
            await skill_files(conn, world.alice, "for-bob")
    assert alice == ["everyone"]
    assert bob == ["everyone", "for-bob"]
    assert admin == ["admins", "everyone", "for-bob"]


async def test_bad_paths_and_names_are_refused_by_sql(world: World) -> None:
    async with world.pool.connection() as conn:
        for files in (
            {"SKILL.md": b"x", "../up": b"x"},
            {"SKILL.md": b"x", "/abs": b"x"},
            {"other.md": b"x"},
        ):
            with pytest.raises(InvalidInput):
                await skill_add(
                    conn, None, slug="bad", description="x", front_matter={}, files=files
                )
        with pytest.raises(InvalidInput, match="invalid skill name"):
            await skill_add(
                conn, None, slug="Bad", description="x", front_matter={}, files={"SKILL.md": b""}
            )


async def test_a_personal_skill_is_written_whole_in_one_transaction(world: World) -> None:
    files = PostgresFileStore(world.pool)
    tree = await files.workspace_tree(world.alice)
    first = bundle(files_of("notes", "first") | {"a.md": b"a", "deep/b.md": b"b"})
    async with world.pool.connection() as conn:
        await place_personal_skill(conn, files, world.alice, first, [], writer_uid=world.alice)
    listed = await files.list(tree, "skills")
    assert [i.path for i in listed] == [
        "skills/notes/SKILL.md",
        "skills/notes/a.md",
        "skills/notes/deep/b.md",
    ]
    assert {i.written_by_uid for i in listed} == {world.alice}
    [record] = await user_personal_skills(files, world.alice)
    assert (record.slug, record.source, record.description) == ("notes", "personal", "first")
    assert record.sha256 == first.sha256  # streamed from the store, the same digest

    # a second version past the store's per-file limit: refused, the first one intact
    await world.execute("UPDATE yuxi.file_limits SET file_max_bytes = 1000")
    try:
        big = bundle(files_of("notes", "second") | {"big.bin": b"x" * 2000})
        with pytest.raises(PayloadTooLarge):
            async with world.pool.connection() as conn:
                await place_personal_skill(conn, files, world.alice, big, [])
    finally:
        await world.execute("UPDATE yuxi.file_limits SET file_max_bytes = DEFAULT")
    assert [i.path for i in await files.list(tree, "skills")] == [i.path for i in listed]
    assert (await user_personal_skills(files, world.alice))[0].sha256 == first.sha256

    # a second version that drops files: they go
    second = bundle(files_of("notes", "second"))
    async with world.pool.connection() as conn:
        await place_personal_skill(conn, files, world.alice, second, [])
    assert [i.path for i in await files.list(tree, "skills")] == ["skills/notes/SKILL.md"]
    assert (await user_personal_skills(files, world.alice))[0].sha256 == second.sha256

    # dependencies resolve against the user's shared and personal skills
    with pytest.raises(InvalidInput, match="ghost"):
        async with world.pool.connection() as conn:
            await place_personal_skill(
                conn, files, world.alice, bundle(files_of("top", skills=["ghost"])), []
            )
    async with world.pool.connection() as conn:
        await place_personal_skill(
            conn, files, world.alice, bundle(files_of("top", skills=["notes"])), []
        )
    assert [r.slug for r in await user_personal_skills(files, world.alice)] == ["notes", "top"]
    assert [r.slug for r in await user_personal_skills(files, world.alice, only="top")] == ["top"]
    assert await user_personal_skills(files, world.bob) == []

    assert await remove_personal_skill(files, world.alice, "top")
    assert not await remove_personal_skill(files, world.alice, "top")
    assert not await remove_personal_skill(files, world.alice, "../notes")
    assert [r.slug for r in await user_personal_skills(files, world.alice)] == ["notes"]


async def test_malformed_personal_skills_in_the_store_are_skipped(world: World) -> None:
    files = PostgresFileStore(world.pool)
    tree = await files.workspace_tree(world.alice)
    await files.write(tree, "skills/good/SKILL.md", files_of("good")["SKILL.md"])
    await files.write(tree, "skills/other/SKILL.md", files_of("good")["SKILL.md"])  # names good
    await files.write(tree, "skills/broken/SKILL.md", b"no front matter")
    await files.write(tree, "skills/binary/SKILL.md", b"\xff\xfe\x00")
    await files.write(tree, "skills/nomd/README.md", b"no SKILL.md")
    await files.write(tree, "skills/Not_A_Slug/SKILL.md", files_of("good")["SKILL.md"])
    await files.write(tree, "skills/README.md", b"beside the skills")
    assert [r.slug for r in await user_personal_skills(files, world.alice)] == ["good"]
