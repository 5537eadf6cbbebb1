"""The ``yuxi`` command. Each subcommand lives in the module named after what it
manages; heavy imports (the API, the worker, the agent stack) happen only in the
commands that use them, so ``yuxi --help`` and the operator commands start fast."""

from __future__ import annotations

import click

from yuxi.cli.agents import agent
from yuxi.cli.db import db
from yuxi.cli.knowledge import kb
from yuxi.cli.mcp import mcp
from yuxi.cli.models import model
from yuxi.cli.queues import queue
from yuxi.cli.serve import api, up, worker
from yuxi.cli.skills import skill
from yuxi.cli.users import user


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """yuxi: LangGraph agents behind an HTTP API, with PostgreSQL as the only dependency.

    Configuration comes from the environment: YUXI_HOME (default ./.yuxi),
    YUXI_DATABASE_URL (an external PostgreSQL; the embedded one under YUXI_HOME
    otherwise), YUXI_HOST and YUXI_PORT.
    """


for command in (up, api, worker, db, user, agent, model, queue, kb, skill, mcp):
    main.add_command(command)


if __name__ == "__main__":
    main()
