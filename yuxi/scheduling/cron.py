"""5-field cron in an IANA time zone, fired in UTC.

Slots are computed in the job's zone and converted to UTC. Across DST changes a job at a
specific time behaves like Debian cron (cronsim's rules): a slot inside a spring-forward
gap fires once, at the first valid instant after it; a wall-clock time that repeats in
the fall-back hour fires once. Every slot is a distinct, strictly increasing UTC instant.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

MAX_LENGTH = 200


class CronError(ValueError):
    """The cron expression or time zone is unusable; the message says which and why."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (e.g. ``Europe/Paris``); CronError when unknown."""
    if not name or len(name) > 64 or name.startswith("/") or ".." in name:
        raise CronError(f"unknown time zone {name!r}; use an IANA name such as Europe/Paris")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(
            f"unknown time zone {name!r}; use an IANA name such as Europe/Paris"
        ) from None


def validate(expression: str, timezone: str) -> None:
    """Raises CronError unless ``expression`` is a valid 5-field cron that fires at least
    once in the next 50 years in ``timezone``."""
    tz = zone(timezone)
    fields = expression.split()
    if len(expression) > MAX_LENGTH:
        raise CronError(f"the cron expression is longer than {MAX_LENGTH} characters")
    if len(fields) != 5:
        raise CronError(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week),"
            f" {expression!r} has {len(fields)}"
        )
    try:
        iterator = CronSim(expression, datetime.now(tz))
    except CronSimError as error:
        raise CronError(f"invalid cron expression {expression!r}: {error}") from None
    try:
        next(iterator)
    except StopIteration:
        raise CronError(f"cron expression {expression!r} never fires") from None
    except CronSimError as error:
        raise CronError(f"invalid cron expression {expression!r}: {error}") from None


def next_fire(expression: str, timezone: str, after: datetime) -> datetime:
    """The first slot strictly after ``after`` (aware), in UTC."""
    if after.tzinfo is None:
        raise ValueError("after must be timezone-aware")
    tz = zone(timezone)
    if len(expression.split()) != 5:
        raise CronError(
            f"a cron expression has 5 fields, {expression!r} has {len(expression.split())}"
        )
    try:
        for candidate in CronSim(expression, after.astimezone(tz)):
            fire = candidate.astimezone(UTC)
            if fire > after:
                return fire
    except CronSimError as error:
        raise CronError(f"invalid cron expression {expression!r}: {error}") from None
    raise CronError(f"cron expression {expression!r} never fires")
