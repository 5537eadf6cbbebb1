"""The cost of skills in a run's preparation: ``prepare_agent_runtime_context`` plus
``build_manifest`` with the database catalog, for an agent whose ``skills`` is unset
(every visible skill) with 0, 10 and 100 shared skills visible, against the same agent
with ``skills: []`` (none), on the same database and home.

Each skill is a SKILL.md of about 1 KiB and two files beside it; every tenth one depends
on the one before it. The skills' files are written under the home on the first
preparation (timed apart, as "first"); the timed ones find them there, as a worker does
once it has run a skill version. Variants alternate in blocks of 10 after a warm-up, on
one connection pool of 4.

Target: 100 visible skills add at most 10 ms (p50) to a preparation without skills;
the ratio is shown too (preparation without skills is well under a millisecond, so the
ratio grows fast while the added time stays small).

    uv run python -m tests.bench.skills [--iterations 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from psycopg_pool import AsyncConnectionPool

from tests.bench.harness import (
    BenchDatabase,
    log,
    percentile,
    print_table,
    run_benchmark,
    seed_owner,
    verdict,
)
from yuxi.agents.chatbot import ChatBotAgent
from yuxi.queue.runs import ExecutionInput
from yuxi.queue.skills import skill_add
from yuxi.resources import DatabaseCatalog
from yuxi.runtime.manifest import build_manifest
from yuxi.runtime.prepare import prepare_agent_runtime_context

BLOCK = 10
TARGET_MS = 10.0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--iterations", type=int, default=300, help="timed preparations per variant")
    return p


def run_input(uid: UUID, skills: list[str] | None) -> ExecutionInput:
    context: dict[str, Any] = {"model": "builtin:scripted"}
    if skills is not None:
        context["skills"] = skills
    return ExecutionInput(
        run_id=uuid4(),
        thread_id=uuid4(),
        uid=uid,
        request_id="bench",
        run_type="chat",
        created_by_run_id=None,
        agent_slug="chatbot",
        backend_id="chatbot",
        agent_config={"context": context},
        agent_updated_at=None,
        project_id=None,
        workdir_path=None,
        input_text="hi",
        input_payload={"model_spec": "builtin:scripted", "tool_approval_mode": "auto"},
        identity_error=None,
        visible_subagents=[],
    )


async def add_skills(pool: AsyncConnectionPool[Any], start: int, count: int) -> None:
    async with pool.connection() as conn:
        for i in range(start, start + count):
            slug = f"skill-{i:03d}"
            deps = [f"skill-{i - 1:03d}"] if i % 10 == 9 else []
            body = f"# Skill {i}\n\n" + ("Steps to follow for this kind of task. " * 25)
            dep_text = f"dependencies:\n  skills: [{deps[0]}]\n" if deps else ""
            md = f"---\nname: {slug}\ndescription: Handles task kind {i}.\n{dep_text}---\n{body}"
            await skill_add(
                conn,
                None,
                slug=slug,
                description=f"Handles task kind {i}.",
                front_matter={"name": slug},
                files={
                    "SKILL.md": md.encode(),
                    "reference.md": b"reference " * 200,
                    "scripts/run.py": b"print('hi')\n" * 20,
                },
                skills=deps,
            )


async def time_variants(
    catalog: DatabaseCatalog, home: Path, variants: dict[str, ExecutionInput], iterations: int
) -> dict[str, list[float]]:
    agent = ChatBotAgent()

    async def once(run: ExecutionInput) -> float:
        started = time.perf_counter()
        prepared = await prepare_agent_runtime_context(agent, run, catalog=catalog, home=home)
        build_manifest(prepared, run)
        return (time.perf_counter() - started) * 1000

    for run in variants.values():  # warm-up
        for _ in range(BLOCK):
            await once(run)
    times: dict[str, list[float]] = {name: [] for name in variants}
    while min(len(t) for t in times.values()) < iterations:
        for name, run in variants.items():
            for _ in range(BLOCK):
                times[name].append(await once(run))
    return times


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    uid = seed_owner(database.url)
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        database.url, min_size=4, max_size=4, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    rows: list[list[object]] = []
    ratios: dict[int, float] = {}
    added: dict[int, float] = {}
    try:
        catalog = DatabaseCatalog(pool)
        with tempfile.TemporaryDirectory(prefix="yuxi-bench-skills-") as raw:
            home = Path(raw)
            present = 0
            for visible in (0, 10, 100):
                await add_skills(pool, present, visible - present)
                present = visible
                first_started = time.perf_counter()
                await prepare_agent_runtime_context(
                    ChatBotAgent(), run_input(uid, None), catalog=catalog, home=home
                )
                first = (time.perf_counter() - first_started) * 1000
                log(f"{visible} skills visible: first preparation {first:.1f} ms")
                times = await time_variants(
                    catalog,
                    home,
                    {"none": run_input(uid, []), "unset": run_input(uid, None)},
                    args.iterations,
                )
                none50 = percentile(times["none"], 0.5)
                unset50 = percentile(times["unset"], 0.5)
                ratios[visible] = unset50 / none50
                added[visible] = unset50 - none50
                rows.append(
                    [
                        visible,
                        f"{none50:.2f}",
                        f"{percentile(times['none'], 0.99):.2f}",
                        f"{unset50:.2f}",
                        f"{percentile(times['unset'], 0.99):.2f}",
                        f"{first:.1f}",
                        f"{ratios[visible]:.2f}",
                    ]
                )
    finally:
        await pool.close()
    print_table(
        "run preparation (prepare_agent_runtime_context + build_manifest), ms",
        [
            "visible skills",
            "none p50",
            "none p99",
            "skills p50",
            "skills p99",
            "first",
            "ratio p50",
        ],
        rows,
    )
    ok = added[100] <= TARGET_MS
    print(
        f"\n  100 visible skills add {added[100]:.2f} ms p50 ({ratios[100]:.1f}x none;"
        f" target ≤ {TARGET_MS:.0f} ms) — {verdict(ok)}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_benchmark("skills", "skills in run preparation", parser().parse_args(), measure))
