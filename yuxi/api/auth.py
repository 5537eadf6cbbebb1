"""Who may do what: admins manage agents and users."""

from __future__ import annotations

from yuxi.api.errors import Forbidden
from yuxi.queue.callers import User

__all__ = ["User", "require_admin"]


def require_admin(user: User, what: str = "manage agents") -> None:
    """403 ``forbidden`` unless the caller is an admin."""
    if not user.is_admin:
        raise Forbidden(f"only admins may {what}")
