"""Who may do what: admins manage agents."""

from __future__ import annotations

from yuxi.api.errors import Forbidden
from yuxi.queue.users import User

__all__ = ["User", "require_admin"]


def require_admin(user: User) -> None:
    if not user.is_admin:
        raise Forbidden("only admins may manage agents")
