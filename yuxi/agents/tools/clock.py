"""``get_current_time``: the current date and time in an IANA time zone."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langchain_core.tools import ToolException, tool


@tool(parse_docstring=True)
def get_current_time(timezone: str | None = None) -> str:
    """Return the current date and time in ISO 8601 format.

    Args:
        timezone: IANA time zone name, e.g. "Europe/Paris" or "Asia/Shanghai". Default UTC.
    """
    name = (timezone or "").strip()
    if not name:
        return datetime.now(UTC).isoformat(timespec="seconds")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolException(
            f"unknown time zone {name!r}: use an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from None
    return datetime.now(zone).isoformat(timespec="seconds")
