"""yuxi processes on one database, as docs/deployment.md draws them: each a real `yuxi
api` or `yuxi worker` with a `YUXI_HOME` of its own and the same server key, its output
in ``<root>/<name>.log``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from yuxi.models.secret_box import new_key


class Hosts:
    def __init__(self, db_url: str, root: Path, key: str | None = None) -> None:
        self.db_url = db_url
        self.root = root
        self.key = key or new_key()
        self.processes: dict[str, asyncio.subprocess.Process] = {}

    def home(self, name: str) -> Path:
        return self.root / name

    async def start(
        self, name: str, command: str, port: int | None = None, **env: str
    ) -> asyncio.subprocess.Process:
        environment = {
            **os.environ,
            "YUXI_DATABASE_URL": self.db_url,
            "YUXI_HOME": str(self.home(name)),
            "YUXI_SECRET_KEY": self.key,
            "YUXI_WORKER_CONCURRENCY": "2",
            "YUXI_MAINTENANCE_SECONDS": "1",
            **env,
        }
        if port is not None:
            environment["YUXI_PORT"] = str(port)
        with (self.root / f"{name}.log").open("ab") as log:  # the child keeps its own copy
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuxi.cli",
                command,
                env=environment,
                stdout=log,
                stderr=log,
            )
        self.processes[name] = process
        return process

    async def stop(self, name: str) -> int:
        """SIGTERM, then the exit status (60 s at most)."""
        process = self.processes.pop(name)
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(process.wait(), 60)

    async def stop_all(self) -> None:
        for name in list(self.processes):
            await self.stop(name)

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")
