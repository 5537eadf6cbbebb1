"""Every log record of this process while a test runs: the API the ``api`` fixture serves
runs in it, so what its server would print (the access log, uvicorn's own lines,
tracebacks) is here to assert on."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator

ACCESS = "yuxi.api.access"
# the test's own HTTP client logs in this process too (URLs with their query strings)
CLIENT_LOGGERS = ("httpx", "httpcore")
FIELD = re.compile(r"(\w+)=(\S+)")


class Capture(logging.Handler):
    """Every record of every logger, including those that do not propagate to the root."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.partition(".")[0] not in CLIENT_LOGGERS:
            self.records.append(record)

    def access(self, path: str) -> list[dict[str, str]]:
        lines = [dict(FIELD.findall(r.getMessage())) for r in self.records if r.name == ACCESS]
        return [line for line in lines if line.get("path") == path]

    def texts(self) -> Iterator[str]:
        """Everything a formatter could print of each record."""
        formatter = logging.Formatter()
        for record in self.records:
            yield formatter.format(record)
            yield repr(record.__dict__)

    def tracebacks(self) -> list[str]:
        """Each record that carries a traceback, or is an error, as a formatter prints it."""
        formatter = logging.Formatter()
        return [
            formatter.format(record)
            for record in self.records
            if record.exc_info
            or record.levelno >= logging.ERROR
            or "Traceback" in record.getMessage()
        ]


@contextlib.contextmanager
def capturing() -> Iterator[Capture]:
    """Captures every record until the block ends (the ``logs`` fixture of
    tests/api/conftest.py is this around one test)."""
    capture = Capture()
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.root.manager.loggerDict.values()
        if isinstance(logger, logging.Logger) and not logger.propagate
    ]
    root_level = logging.root.level
    logging.root.setLevel(logging.DEBUG)
    for logger in loggers:
        logger.addHandler(capture)
    try:
        yield capture
    finally:
        for logger in loggers:
            logger.removeHandler(capture)
        logging.root.setLevel(root_level)
