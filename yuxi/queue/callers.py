"""Who a queue call is made as: a live user, or a request's bearer token that the call
itself checks."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import msgspec


class User(msgspec.Struct, frozen=True):
    """The live user a token belongs to: who every API call is made as."""

    uid: UUID
    name: str
    is_admin: bool


class Bearer:
    """A request's API token, not checked yet. Given as a queue call's ``uid``, the call
    checks it in its own statement (``yuxi.token_authenticate`` joined laterally to the
    called function, yuxi.queue.calls), so that authenticating costs a request no round
    trip of its own and a revoked token is refused by the very statement that would have
    acted for it. A token no live user holds makes the call raise ``Unauthenticated``
    having done nothing; otherwise ``user`` is its user (and ``on_user`` is told)."""

    __slots__ = ("on_user", "token_hash", "user")

    def __init__(self, token_hash: bytes, on_user: Callable[[User], None] | None = None) -> None:
        self.token_hash = token_hash
        self.user: User | None = None
        self.on_user = on_user

    def checked(self, user: User) -> User:
        self.user = user
        if self.on_user is not None:
            self.on_user(user)
        return user
