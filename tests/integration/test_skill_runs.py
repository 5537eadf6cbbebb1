"""Skills in a run's preparation with the database catalog: the index and preloads in the
prompt, files written once under the yuxi home, a subagent deciding its own skills, and
the write-once manifest refusing a retry whose skill bytes changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.claims import run_claim
from tests.fixtures.skills import SKILLS, skill_md
from tests.integration.conftest import World
from tests.integration.worker_harness import running_worker, wait_for_status, wait_until
from yuxi.agents.chatbot import ChatBotAgent
from yuxi.agents.graph import build_system_prompt
from yuxi.agents.subagent import SubAgent
from yuxi.files.layout import user_workspace
from yuxi.queue.runs import RunClaim
from yuxi.resources import DatabaseCatalog
from yuxi.runtime.manifest import build_manifest
from yuxi.runtime.prepare import prepare_agent_runtime_context
from yuxi.skills.format import bundle, read_source
from yuxi.skills.resolve import SkillError
from yuxi.skills.store import add_shared_skill


async def upload(world: World, *names: str) -> None:
    async with world.pool.connection() as conn:
        for name in names:
            await add_shared_skill(conn, None, read_source(SKILLS / name))


def run_input(world: World, context: dict[str, Any], **overrides: Any) -> RunClaim:
    values: dict[str, Any] = {
        "uid": world.alice,
        "agent_config": {"context": context},
        "visible_subagents": [],
    }
    values.update(overrides)
    return run_claim(**values)


async def test_preparation_puts_the_index_and_preloads_in_the_prompt(
    world: World, tmp_path: Path
) -> None:
    await upload(world, "writing-style", "report-writer")
    config = {"skills": ["report-writer"], "preload_skills": ["writing-style"], "tools": []}
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run_input(world, config), catalog=DatabaseCatalog(world.pool), home=tmp_path
    )
    context = prepared.context
    assert context.skills == ["report-writer", "writing-style"]
    prompt = build_system_prompt(context)
    assert "- report-writer: Writes a one-page status report" in prompt
    assert "- writing-style: House writing style." in prompt
    assert '<skill name="writing-style">\n# Writing style' in prompt  # preloaded
    assert "# Report writer" not in prompt  # only once activated
    # the files are written once, under the home, named by the version's digest
    sha = read_source(SKILLS / "report-writer").sha256
    assert context.resolved.skill_roots["report-writer"] == str(tmp_path / "skills" / sha)
    assert (tmp_path / "skills" / sha / "templates" / "outline.md").is_file()
    # report-writer brings the calculator, hidden until it is active
    assert context.tools == ["calculator"]
    assert context.resolved.skill_mounts["report-writer"] == {"tools": ["calculator"], "mcps": []}
    manifest = build_manifest(prepared, run_input(world, config))
    assert [s["slug"] for s in manifest["skills"]] == ["report-writer", "writing-style"]
    assert manifest["skills_preloaded"]["writing-style"]["bytes"] > 0
    assert str(tmp_path) not in json.dumps(manifest)


async def test_a_subagent_decides_its_own_skills(world: World, tmp_path: Path) -> None:
    await upload(world, "writing-style")
    catalog = DatabaseCatalog(world.pool)
    none = run_input(world, {"skills": []}, run_type="subagent", backend_id="subagent")
    prepared = await prepare_agent_runtime_context(SubAgent(), none, catalog=catalog, home=tmp_path)
    assert prepared.context.skills == []
    assert build_manifest(prepared, none)["skills"] == []
    unset = run_input(world, {}, run_type="subagent", backend_id="subagent")
    prepared = await prepare_agent_runtime_context(
        SubAgent(), unset, catalog=catalog, home=tmp_path
    )
    assert [s["slug"] for s in build_manifest(prepared, unset)["skills"]] == ["writing-style"]


async def test_a_retry_whose_skill_changed_fails_with_manifest_conflict(
    world: World, db_url: str, tmp_path: Path
) -> None:
    await upload(world, "writing-style")
    await world.execute(
        "UPDATE yuxi.agents SET config_json = %s WHERE slug = 'chatbot'",
        json.dumps({"context": {"model": "builtin:scripted", "skills": ["writing-style"]}}),
    )
    thread = await world.thread()
    info = await world.submit(thread, "/sleep 30")
    async with running_worker(db_url, tmp_path):
        await wait_for_status(world, info.run_id, {"running"})

        async def manifest_committed() -> bool:
            return bool(
                await world.value(
                    "SELECT manifest_fingerprint IS NOT NULL FROM yuxi.agent_runs"
                    " WHERE run_id = %s",
                    info.run_id,
                )
            )

        await wait_until(manifest_committed)
    first = await world.value("SELECT manifest FROM yuxi.agent_runs WHERE run_id = %s", info.run_id)
    assert first["skills"][0]["version"] == 1
    # a new version between the attempts: the retry resolves other bytes
    changed = bundle({"SKILL.md": skill_md("writing-style", "A new house style").encode()})
    async with world.pool.connection() as conn:
        assert (await add_shared_skill(conn, None, changed)).version == 2
    async with running_worker(db_url, tmp_path):
        assert await wait_for_status(world, info.run_id) == "failed"
    row = await world.fetch(
        "SELECT error_type, manifest, attempt_count FROM yuxi.agent_runs WHERE run_id = %s",
        info.run_id,
    )
    assert row == [("manifest_conflict", first, 2)]


async def test_a_cycle_among_personal_skills_fails_preparation(
    world: World, tmp_path: Path
) -> None:
    workspace = user_workspace(tmp_path, str(world.alice))
    for name, dep in (("ping", "pong"), ("pong", "ping")):
        (workspace / "skills" / name).mkdir(parents=True)
        (workspace / "skills" / name / "SKILL.md").write_text(skill_md(name, "x", skills=[dep]))
    catalog = DatabaseCatalog(world.pool)
    with pytest.raises(SkillError, match="cycle: ping -> pong -> ping"):
        await prepare_agent_runtime_context(
            ChatBotAgent(), run_input(world, {"skills": ["ping"]}), catalog=catalog, home=tmp_path
        )
    # unset: the broken skills are left out, the run goes on without them
    prepared = await prepare_agent_runtime_context(
        ChatBotAgent(), run_input(world, {}), catalog=catalog, home=tmp_path
    )
    assert prepared.context.skills == []
