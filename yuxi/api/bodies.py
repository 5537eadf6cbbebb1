"""The base of request bodies: unknown fields in a request body are refused.

Each body is defined next to the routes that take it (``yuxi/api/routes/``). Where a
queue struct has exactly a response's fields, the API returns it as it is (``Thread``,
``Job``, ``Occurrence``); the request bodies an agent is saved with are the queue's
``AgentSettings`` and ``NewAgent``."""

from __future__ import annotations

import msgspec


class Body(msgspec.Struct, forbid_unknown_fields=True):
    """Base of request bodies."""
