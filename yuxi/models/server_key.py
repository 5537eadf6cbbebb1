"""One server key for every host of a database: the check each process makes before it
seals or opens a secret, and the record of a rotation.

The database records the identifier of the server key (``secret_box.server_key_id``, a
keyed hash), set by the first process to start (``yuxi.server_key_check``). A process
whose key is not the recorded one, nor one of its previous keys (a rotation under way),
is refused: what it sealed the other hosts could not open, and the other way round.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from yuxi.models.secret_box import SecretBox
from yuxi.queue.server_key import KeyVerdict, server_key_check, server_key_rotate
from yuxi.settings import SettingsError

MISMATCH = (
    "this process's server key is not the one the database records: every host sharing a"
    " database must seal and open its secrets (model API keys, MCP headers and env) with"
    " the same key, and this one's was made elsewhere (YUXI_SECRET_KEY, or"
    " <YUXI_HOME>/secret.key when that is unset). Copy the key of the first host (its"
    " YUXI_SECRET_KEY, or its <YUXI_HOME>/secret.key) to this one, or set the same"
    " YUXI_SECRET_KEY on every host; during a rotation, put the old key in"
    " YUXI_SECRET_KEY_PREVIOUS (docs/models.md#keys-at-rest-and-key-rotation)"
)


class ServerKeyMismatch(SettingsError):
    """The process's server key is neither the recorded one nor one of its previous keys.
    Its message says what to do and never contains a key."""

    def __init__(self) -> None:
        super().__init__(MISMATCH)


async def server_key_verify(conn: AsyncConnection[Any], box: SecretBox) -> KeyVerdict:
    """Records ``box``'s key as the database's when none is recorded; returns how it
    compares (``recorded``, ``current`` or ``previous``) or raises ``ServerKeyMismatch``."""
    verdict = await server_key_check(conn, box.key_id, box.previous_key_ids)
    if verdict == "other":
        raise ServerKeyMismatch
    return verdict


async def server_key_record(conn: AsyncConnection[Any], box: SecretBox) -> None:
    """After a rotation, once every secret is sealed under ``box``'s current key: the
    database records that key in place of the previous one."""
    if not await server_key_rotate(conn, box.key_id, box.previous_key_ids):
        raise ServerKeyMismatch
