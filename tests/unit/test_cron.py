"""Next-fire table tests across zones, month ends, DST gaps and overlaps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from yuxi.scheduling.cron import CronError, next_fire, validate


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "zone", "after", "expected"),
    [
        # every day 09:00 in three zones, from the same instant
        ("0 9 * * *", "UTC", utc(2026, 1, 10, 12), utc(2026, 1, 11, 9)),
        ("0 9 * * *", "Asia/Shanghai", utc(2026, 1, 10, 12), utc(2026, 1, 11, 1)),
        ("0 9 * * *", "America/Los_Angeles", utc(2026, 1, 10, 12), utc(2026, 1, 10, 17)),
        # half-hour zone
        ("0 9 * * *", "Asia/Kolkata", utc(2026, 1, 10, 0), utc(2026, 1, 10, 3, 30)),
        # strictly after: a slot exactly at `after` is not returned again
        ("0 9 * * *", "UTC", utc(2026, 1, 10, 9), utc(2026, 1, 11, 9)),
        # month ends: the 31st skips short months; February 29 only in leap years
        ("0 0 31 * *", "UTC", utc(2026, 1, 31, 1), utc(2026, 3, 31)),
        ("0 0 29 2 *", "UTC", utc(2026, 3, 1), utc(2028, 2, 29)),
        ("0 0 1 * *", "Europe/Paris", utc(2026, 1, 31, 22, 59), utc(2026, 1, 31, 23)),
        # weekdays: Monday 08:00 Berlin, from a Saturday
        ("0 8 * * 1", "Europe/Berlin", utc(2026, 3, 7, 12), utc(2026, 3, 9, 7)),
        # New Year across the date line
        ("0 0 1 1 *", "Pacific/Auckland", utc(2026, 6, 1), utc(2026, 12, 31, 11)),
        # spring forward (US, 2026-03-08 02:00 → 03:00): 02:30 does not exist; it fires
        # once, at the next valid instant (03:00 EDT = 07:00 UTC)
        ("30 2 * * *", "America/New_York", utc(2026, 3, 8, 6), utc(2026, 3, 8, 7)),
        ("30 2 * * *", "America/New_York", utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)),
        # spring forward (EU, 2026-03-29 02:00 → 03:00 in Berlin)
        ("15 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 23), utc(2026, 3, 29, 1)),
        # fall back (US, 2026-11-01 02:00 EDT → 01:00 EST): 01:30 happens twice, fires once
        ("30 1 * * *", "America/New_York", utc(2026, 11, 1, 4), utc(2026, 11, 1, 5, 30)),
        ("30 1 * * *", "America/New_York", utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)),
        # fall back (EU, 2026-10-25 03:00 CEST → 02:00 CET): 02:30 fires once
        ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 22), utc(2026, 10, 25, 0, 30)),
        ("30 2 * * *", "Europe/Berlin", utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)),
    ],
)
def test_next_fire(cron: str, zone: str, after: datetime, expected: datetime) -> None:
    assert next_fire(cron, zone, after) == expected


def test_interval_jobs_keep_their_interval_through_dst_changes() -> None:
    fires = [utc(2026, 3, 8, 6)]
    for _ in range(4):
        fires.append(next_fire("*/30 * * * *", "America/New_York", fires[-1]))
    # 01:30 EST, then 03:00 EDT: the missing hour is skipped, not fired into
    assert fires[1:] == [
        utc(2026, 3, 8, 6, 30),
        utc(2026, 3, 8, 7),
        utc(2026, 3, 8, 7, 30),
        utc(2026, 3, 8, 8),
    ]
    fires = [utc(2026, 11, 1, 4, 45)]
    for _ in range(4):
        fires.append(next_fire("0 * * * *", "America/New_York", fires[-1]))
    # every hour, each a distinct instant: 01:00 EDT, 01:00 EST, 02:00 EST, ...
    assert fires[1:] == [
        utc(2026, 11, 1, 5),
        utc(2026, 11, 1, 6),
        utc(2026, 11, 1, 7),
        utc(2026, 11, 1, 8),
    ]


@pytest.mark.parametrize(
    ("cron", "zone", "message"),
    [
        ("0 9 * *", "UTC", "has 4"),
        ("0 0 9 * * *", "UTC", "has 6"),
        ("61 * * * *", "UTC", "Bad minute"),
        ("0 25 * * *", "UTC", "Bad hour"),
        ("0 0 32 * *", "UTC", "Bad day-of-month"),
        ("0 0 * 13 *", "UTC", "Bad month"),
        ("0 0 * * 8", "UTC", "Bad day-of-week"),
        ("0 0 30 2 *", "UTC", "invalid cron expression"),
        ("@daily", "UTC", "has 1"),
        ("0 9 * * *", "Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        ("0 9 * * *", "", "unknown time zone ''"),
        ("0 9 * * *", "../etc/passwd", "unknown time zone"),
    ],
)
def test_invalid_expressions_and_zones_say_why(cron: str, zone: str, message: str) -> None:
    with pytest.raises(CronError, match=message.replace("(", r"\(")):
        validate(cron, zone)


def test_valid_expressions_pass() -> None:
    for cron in ("* * * * *", "*/5 9-17 * * MON-FRI", "0 0 1,15 * *", "0 12 * JAN,JUL SUN"):
        validate(cron, "Europe/Paris")
