"""Property-based requests generated from the OpenAPI schema: no input makes a 5xx."""

from __future__ import annotations

import asyncio
import shutil
import sys

import pytest

from tests.api.conftest import Api

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]


async def test_no_generated_request_gets_a_server_error(api: Api, worker: None) -> None:
    # with a worker, as a server runs: without one, every generated run stays pending and
    # the /lg waits and streams on them pile up until the pool's 5 s timeout answers 503
    schemathesis = shutil.which("schemathesis") or shutil.which("st")
    command = [schemathesis] if schemathesis else [sys.executable, "-m", "schemathesis.cli"]
    process = await asyncio.create_subprocess_exec(
        *command,
        "run",
        f"{api.base_url}/schema/openapi.json",
        "-H",
        f"Authorization: Bearer {api.tokens['admin']}",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "25",
        "--seed",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 600)
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-4000:]
    assert " passed" in text
