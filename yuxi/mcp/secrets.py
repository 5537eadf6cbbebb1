"""An MCP server's headers and env at rest: one JSON object each, sealed under the
server key and bound to the server's id and the kind (a sealed header map copied into
the env column, or into another server's row, does not open there)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from uuid import UUID

from yuxi.models.secret_box import SecretBox
from yuxi.queue.errors import InvalidInput
from yuxi.queue.mcp import Sealed

# an HTTP header's name (RFC 9110 token) and an environment variable's
_NAMES = {
    "headers": re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$"),
    "env": re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"),
}
MAX_VALUE = 8192


def secret_context(server_id: UUID | str, kind: str) -> str:
    return f"mcp:{server_id}:{kind}"


def seal_map(box: SecretBox, server_id: UUID, kind: str, values: Mapping[str, str]) -> Sealed:
    """``values`` checked (names and sizes; the message names the key, never a value)
    and sealed; no values: nothing stored."""
    pattern = _NAMES[kind]
    for name, value in values.items():
        if not isinstance(name, str) or not pattern.match(name):
            raise InvalidInput(f"{kind}: {name!r} is not a valid name")
        if not isinstance(value, str) or len(value) > MAX_VALUE or "\n" in value or "\r" in value:
            raise InvalidInput(f"{kind}: the value of {name} must be one line of text")
    if not values:
        return Sealed([], None)
    plaintext = json.dumps(dict(values), sort_keys=True)
    return Sealed(sorted(values), box.seal(plaintext, secret_context(server_id, kind)))


def open_map(box: SecretBox, server_id: UUID, kind: str, sealed: bytes | None) -> dict[str, str]:
    """The headers or env of a server (in the worker, when connecting)."""
    if sealed is None:
        return {}
    opened = json.loads(box.open(bytes(sealed), secret_context(server_id, kind)))
    return {str(k): str(v) for k, v in opened.items()}
