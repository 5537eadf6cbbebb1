"""Files through the API against the same bytes written and read as 1 MiB ``bytea``
chunks with psycopg directly; and a worker's cache of a large workdir.

- The API runs as a process of its own (``uv run yuxi api``, default settings), so its
  CPU and memory are read alone from /proc.
- Upload: one ``POST /api/chat/thread/{id}/attachments`` of a --mib MiB file of random
  bytes (multipart/form-data, streamed from disk by httpx), into a new thread each
  round. The floor: the same file read from disk and inserted as 1 MiB ``bytea`` rows
  of a plain table (one connection, one commit per chunk as the store does).
- Download: ``GET .../files/content?path=uploads/<name>`` read to a file; the floor
  selects those rows in order and writes them to a file.
- The sides alternate over --rounds rounds; the medians are printed, with the ratio
  (API throughput ÷ floor's), the API's CPU per transfer, its resident memory before,
  and its peak during the transfers (VmHWM): a streamed upload must not hold the file.
- Every transfer is checked: the stored file's sha256 (and the API's answer) and the
  downloaded bytes equal the source.
- Then the cache: a workdir tree of --cache-files files (--cache-mib MiB in all) is
  written to the store, and a worker's ``TreeCache.pull`` measured: cold (an empty
  directory), warm in the same process (the claim's version already seen: what a run
  pays), warm from the files a previous process left (a new process's first run), and
  after one file changed.

Targets: API ÷ floor ≥ 0.5 both ways; the API's peak grows ≤ 16 MiB; a warm cache
adds ≤ 10 ms p50 to a run's preparation.

    uv run python -m tests.bench.file_transfer [--mib 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from uuid import UUID

import httpx
import psycopg

from tests.bench.api_process import api_process, mib, seed_api_owner
from tests.bench.harness import bench_database

CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _floor_write(url: str, source: Path) -> tuple[float, int]:
    """The source into 1 MiB bytea rows, one commit a chunk; seconds, and the run's id."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_chunks (f int, n int, data bytea, PRIMARY KEY (f, n))"
        )
        conn.execute("ALTER TABLE bench_chunks ALTER COLUMN data SET STORAGE EXTERNAL")
        file_id = int(time.time_ns() % 2_000_000_000)
        started = time.perf_counter()
        with source.open("rb") as handle:
            n = 0
            while chunk := handle.read(CHUNK):
                conn.execute("INSERT INTO bench_chunks VALUES (%s, %s, %s)", (file_id, n, chunk))
                n += 1
        return time.perf_counter() - started, file_id


def _floor_read(url: str, file_id: int, target: Path) -> float:
    """Those rows back into a file, a few chunks a query (as the store streams)."""
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        with target.open("wb") as out:
            n = 0
            while True:
                rows = conn.execute(
                    "SELECT data FROM bench_chunks WHERE f = %s AND n BETWEEN %s AND %s ORDER BY n",
                    (file_id, n, n + 3),
                ).fetchall()
                for (data,) in rows:
                    out.write(data)
                if len(rows) < 4:
                    break
                n += 4
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=50, help="file size in MiB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache-files", type=int, default=1000)
    parser.add_argument("--cache-mib", type=int, default=100)
    parser.add_argument("--cache-rounds", type=int, default=5)
    args = parser.parse_args()
    size = args.mib * CHUNK
    with (
        tempfile.TemporaryDirectory(prefix="yuxi-bench-files-") as scratch,
        bench_database("file_transfer") as database,
    ):
        source = Path(scratch) / "source.bin"
        with source.open("wb") as handle:
            for _ in range(args.mib):
                handle.write(os.urandom(CHUNK))
        expected = _sha256(source)
        uid, token = seed_api_owner(database.url)
        env = {"YUXI_ATTACHMENT_MAX_BYTES": str(size + 1), "YUXI_LOG_LEVEL": "WARNING"}
        with psycopg.connect(database.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE yuxi.file_limits SET file_max_bytes = %s, tree_max_bytes = %s,"
                " owner_max_bytes = %s",
                (size * 2, size * 100, size * 1000),
            )
        with api_process(database.url, extra_env=env) as api:
            print(f"# file_transfer: {args.mib} MiB, {args.rounds} rounds, {database.describe()}")
            print(f"# API: {api.describe()}")
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=api.base_url, headers=headers, timeout=300.0) as client:
                # warm-up: one small upload, so the first round pays no import or pool cost
                warm = client.post("/api/chat/thread", json={"agent_id": "chatbot"}).json()["id"]
                client.post(
                    f"/api/chat/thread/{warm}/attachments", files=[("file", ("w.txt", b"w"))]
                )
                _floor_write(database.url, source)
                before = api.sample()
                uploads, downloads, floor_writes, floor_reads = [], [], [], []
                upload_cpu, download_cpu = [], []
                for round_no in range(args.rounds):
                    # the floor first in even rounds, the API first in odd ones
                    order = ["floor", "api"] if round_no % 2 == 0 else ["api", "floor"]
                    for side in order:
                        if side == "floor":
                            seconds, file_id = _floor_write(database.url, source)
                            floor_writes.append(seconds)
                            back = Path(scratch) / f"floor-{round_no}.bin"
                            floor_reads.append(_floor_read(database.url, file_id, back))
                            assert _sha256(back) == expected
                            back.unlink()
                            continue
                        thread = client.post(
                            "/api/chat/thread", json={"agent_id": "chatbot"}
                        ).json()
                        cpu = api.sample().cpu_seconds
                        started = time.perf_counter()
                        with source.open("rb") as handle:
                            response = client.post(
                                f"/api/chat/thread/{thread['id']}/attachments",
                                files=[("file", ("big.bin", handle, "application/octet-stream"))],
                            )
                        uploads.append(time.perf_counter() - started)
                        upload_cpu.append(api.sample().cpu_seconds - cpu)
                        assert response.status_code == 201, response.text
                        [stored] = response.json()
                        assert stored["sha256"] == expected and stored["bytes"] == size, stored
                        cpu = api.sample().cpu_seconds
                        received = Path(scratch) / f"down-{round_no}.bin"
                        started = time.perf_counter()
                        with (
                            client.stream(
                                "GET",
                                f"/api/chat/thread/{thread['id']}/files/content",
                                params={"path": stored["path"]},
                            ) as stream,
                            received.open("wb") as out,
                        ):
                            assert stream.status_code == 200
                            for chunk in stream.iter_bytes(CHUNK):
                                out.write(chunk)
                        downloads.append(time.perf_counter() - started)
                        download_cpu.append(api.sample().cpu_seconds - cpu)
                        assert _sha256(received) == expected
                        received.unlink()
                after = api.sample()

        def rate(seconds: float) -> str:
            return f"{size / CHUNK / seconds:,.0f} MiB/s"

        up, down = statistics.median(uploads), statistics.median(downloads)
        write, read = statistics.median(floor_writes), statistics.median(floor_reads)
        print()
        print("| transfer | API | psycopg bytea chunks | API ÷ floor | API CPU per transfer |")
        print("|---|---:|---:|---:|---:|")
        print(
            f"| upload {args.mib} MiB | {rate(up)} ({up * 1000:,.0f} ms) | {rate(write)} |"
            f" {write / up:.2f} | {statistics.median(upload_cpu) * 1000:,.0f} ms |"
        )
        print(
            f"| download {args.mib} MiB | {rate(down)} ({down * 1000:,.0f} ms) | {rate(read)} |"
            f" {read / down:.2f} | {statistics.median(download_cpu) * 1000:,.0f} ms |"
        )
        print()
        growth = after.hwm_bytes - before.rss_bytes
        print(
            f"API resident memory: {mib(before.rss_bytes)} MiB before the transfers (peak so far"
            f" {mib(before.hwm_bytes)}), peak {mib(after.hwm_bytes)} MiB after them:"
            f" grew by at most {mib(max(growth, 0))} MiB for a {args.mib} MiB file"
            f" ({'PASS' if growth <= 16 * CHUNK else 'MISS'}: the target is 16 MiB)"
        )
        asyncio.run(_cache(database.url, uid, Path(scratch), args))


async def _cache(url: str, uid: UUID, scratch: Path, args: argparse.Namespace) -> None:
    from psycopg_pool import AsyncConnectionPool

    from yuxi.files import cache as cache_module
    from yuxi.files.cache import TreeCache
    from yuxi.files.store import WORKDIR, PostgresFileStore

    each = args.cache_mib * CHUNK // args.cache_files
    async with AsyncConnectionPool(url, kwargs={"autocommit": True}, min_size=2) as pool:
        store = PostgresFileStore(pool)
        tree = await store.tree(uid, WORKDIR, "threads/bench-cache")
        for i in range(args.cache_files):
            await store.write(tree, f"data/{i // 100:02d}/f{i:04d}.bin", os.urandom(each))

        async def version() -> int:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT version FROM yuxi.file_trees WHERE id = %s", (tree,)
                )
                row = await cur.fetchone()
            assert row is not None
            return int(row[0])

        timings: dict[str, list[float]] = {k: [] for k in ("cold", "warm", "disk", "one")}
        for round_no in range(args.cache_rounds):
            home = scratch / f"cache-home-{round_no}"
            directory = home / "workspaces" / str(uid) / "threads" / "bench-cache"
            cache_module._MEMO.clear()
            started = time.perf_counter()
            await TreeCache(store, home, uid, tree, directory).pull(await version())
            timings["cold"].append(time.perf_counter() - started)
            started = time.perf_counter()
            await TreeCache(store, home, uid, tree, directory).pull(await version())
            timings["warm"].append(time.perf_counter() - started)
            cache_module._MEMO.clear()  # a new process: what the disk says
            started = time.perf_counter()
            await TreeCache(store, home, uid, tree, directory).pull(await version())
            timings["disk"].append(time.perf_counter() - started)
            await store.write(tree, "data/00/f0000.bin", os.urandom(each))
            started = time.perf_counter()
            synced = await TreeCache(store, home, uid, tree, directory).pull(await version())
            timings["one"].append(time.perf_counter() - started)
            assert synced.fetched == 1, synced
        print()
        print(
            f"Worker cache of a {args.cache_files}-file, {args.cache_mib} MiB workdir"
            f" (p50 of {args.cache_rounds}, each including the one-query version read a"
            " claim makes for free):"
        )
        print("| pull | p50 | max |")
        print("|---|---:|---:|")
        for name, label in [
            ("cold", "cold (empty directory)"),
            ("warm", "warm, this process saw the version (a run's cost)"),
            ("disk", "warm, a new process (reads the cache's record)"),
            ("one", "one file changed"),
        ]:
            values = timings[name]
            print(
                f"| {label} | {statistics.median(values) * 1000:,.1f} ms |"
                f" {max(values) * 1000:,.1f} ms |"
            )


if __name__ == "__main__":
    main()
