"""An MCP server's headers and env at rest: sealed, bound to the server and the kind,
checked without ever quoting a value."""

from __future__ import annotations

import uuid

import pytest

from yuxi.mcp.secrets import open_map, seal_map
from yuxi.mcp.session import McpServerSpec
from yuxi.models.secret_box import SecretBox, SecretError
from yuxi.queue.errors import InvalidInput

BOX = SecretBox(b"k" * 32)
SECRET = "Bearer s3cret-value"


def test_sealed_headers_open_only_for_their_server_and_kind() -> None:
    server, other = uuid.uuid4(), uuid.uuid4()
    sealed = seal_map(BOX, server, "headers", {"Authorization": SECRET, "X-Team": "a"})
    assert sealed.names == ["Authorization", "X-Team"] and sealed.sealed is not None
    assert SECRET.encode() not in sealed.sealed
    assert open_map(BOX, server, "headers", sealed.sealed)["Authorization"] == SECRET
    with pytest.raises(SecretError):
        open_map(BOX, other, "headers", sealed.sealed)
    with pytest.raises(SecretError):
        open_map(BOX, server, "env", sealed.sealed)
    assert seal_map(BOX, server, "env", {}).sealed is None


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        ("headers", {"Bad Name": SECRET}),
        ("headers", {"Authorization": SECRET + "\r\nX-Injected: 1"}),
        ("env", {"1ABC": SECRET}),
        ("env", {"TOKEN": SECRET * 1000}),
    ],
)
def test_bad_names_and_values_are_refused_without_quoting_a_value(
    kind: str, values: dict[str, str]
) -> None:
    with pytest.raises(InvalidInput) as refused:
        seal_map(BOX, uuid.uuid4(), kind, values)
    assert SECRET not in str(refused.value)


def test_an_opened_spec_never_shows_its_secrets() -> None:
    spec = McpServerSpec(
        id="1", slug="s", name="S", transport="stdio", command="x", headers={"A": SECRET},
        env={"TOKEN": SECRET},
    )  # fmt: skip
    assert SECRET not in repr(spec) and SECRET not in str(spec)
