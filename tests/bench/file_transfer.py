"""Attachments through the API against a plain file copy on the same disk.

- The API runs as a process of its own (``uv run yuxi api``, default settings), so its
  CPU and memory are read alone from /proc.
- Upload: one ``POST /api/chat/thread/{id}/attachments`` of a --mib MiB file of random
  bytes (multipart/form-data, streamed from disk by httpx), into a new thread each
  round; the floor is ``shutil.copyfile`` of the same file to the same filesystem.
- Download: ``GET .../files/content?path=uploads/<name>`` read to a file; the floor is
  the same copy (read + write of the same bytes).
- Each side runs --rounds times, alternating; the medians are printed, with the ratio
  (API throughput ÷ plain copy), the API's CPU per transfer, its resident memory before,
  and its peak during the uploads (VmHWM): a streamed upload must not hold the file.
- Every transfer is checked: the stored file's sha256 (and the API's answer) and the
  downloaded bytes equal the source.

No target is set beyond "the upload is streamed" (peak growth far below the file size).

    uv run python -m tests.bench.file_transfer [--mib 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from tests.bench.api_process import api_process, mib, seed_api_owner
from tests.bench.harness import bench_database


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=50, help="file size in MiB")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    size = args.mib * 2**20
    with (
        tempfile.TemporaryDirectory(prefix="yuxi-bench-files-") as scratch,
        bench_database("file_transfer") as database,
    ):
        source = Path(scratch) / "source.bin"
        with source.open("wb") as handle:
            for _ in range(args.mib):
                handle.write(os.urandom(2**20))
        expected = _sha256(source)
        _uid, token = seed_api_owner(database.url)
        env = {"YUXI_ATTACHMENT_MAX_BYTES": str(size + 1), "YUXI_LOG_LEVEL": "WARNING"}
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
                before = api.sample()
                uploads, downloads, copies, reads = [], [], [], []
                upload_cpu, download_cpu = [], []
                for round_no in range(args.rounds):
                    thread = client.post("/api/chat/thread", json={"agent_id": "chatbot"}).json()
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

                    target = Path(scratch) / f"copy-{round_no}.bin"
                    started = time.perf_counter()
                    shutil.copyfile(source, target)
                    copies.append(time.perf_counter() - started)

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
                        for chunk in stream.iter_bytes(1 << 20):
                            out.write(chunk)
                    downloads.append(time.perf_counter() - started)
                    download_cpu.append(api.sample().cpu_seconds - cpu)
                    assert _sha256(received) == expected

                    started = time.perf_counter()
                    shutil.copyfile(target, Path(scratch) / f"read-{round_no}.bin")
                    reads.append(time.perf_counter() - started)
                    for leftover in (target, received, Path(scratch) / f"read-{round_no}.bin"):
                        leftover.unlink()
                after = api.sample()

        def rate(seconds: float) -> str:
            return f"{size / 2**20 / seconds:,.0f} MiB/s"

        up, down = statistics.median(uploads), statistics.median(downloads)
        copy, read = statistics.median(copies), statistics.median(reads)
        print()
        print("| transfer | API | plain copy | API ÷ copy | API CPU per transfer |")
        print("|---|---:|---:|---:|---:|")
        print(
            f"| upload {args.mib} MiB | {rate(up)} ({up * 1000:,.0f} ms) | {rate(copy)} |"
            f" {copy / up:.2f} | {statistics.median(upload_cpu) * 1000:,.0f} ms |"
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
            f" ({'streamed' if growth < size / 4 else 'NOT streamed'})"
        )


if __name__ == "__main__":
    main()
