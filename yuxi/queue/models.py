"""Transitional: the old home of the queue's structs, kept while the runtime moves to
the noun modules. Deleted once nothing imports it."""

from __future__ import annotations

from yuxi.queue.events import RunEvent
from yuxi.queue.maintenance import ReconciledRun, RedeliveredRun
from yuxi.queue.requests import RequestInfo
from yuxi.queue.runs import ClaimedRun, LeaseState, ManifestCommit, OutputMessage, Run
from yuxi.queue.threads import ThreadQueue

__all__ = [
    "ClaimedRun",
    "LeaseState",
    "ManifestCommit",
    "OutputMessage",
    "ReconciledRun",
    "RedeliveredRun",
    "RequestInfo",
    "Run",
    "RunEvent",
    "ThreadQueue",
]
