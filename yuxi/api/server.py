"""Serving the API with uvicorn inside yuxi's own process and signal handling."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator

import uvicorn

from yuxi.api.request_outcome import OutcomeProtocol
from yuxi.settings import Settings


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # yuxi's CLI owns SIGINT/SIGTERM and stops the server through should_exit
        yield


SHUTDOWN_GRACE_SECONDS = 1  # uvicorn takes whole seconds
# how long a connection without a request in progress is kept open after SIGTERM
IDLE_CLOSE_SECONDS = 0.3


class _DrainingHttp(OutcomeProtocol):
    """uvicorn's HTTP/1.1 connection (noting what a request got instead of the
    application's response: ``OutcomeProtocol``), except at shutdown: uvicorn closes a connection
    with no request in progress at once, and a request on its way then fails — one that
    a proxy sent the moment its connection was accepted (the proxy cannot know it was
    never read, so it answers 502 or retries only what is safe to repeat). Here such a
    connection is kept for ``IDLE_CLOSE_SECONDS``; a request that arrives meanwhile is
    answered, with ``Connection: close``."""

    _idle_close: asyncio.TimerHandle | None = None

    def shutdown(self) -> None:
        if self.cycle is None or self.cycle.response_complete:
            self._idle_close = self.loop.call_later(IDLE_CLOSE_SECONDS, self.transport.close)
        else:
            self.cycle.keep_alive = False

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._idle_close is not None and self.cycle and not self.cycle.response_complete:
            self._idle_close.cancel()
            self._idle_close = None
            self.cycle.keep_alive = False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_close is not None:
            self._idle_close.cancel()
        super().connection_lost(exc)


class ListenError(RuntimeError):
    """The API could not listen on its host and port."""


async def serve_api(url: str, settings: Settings) -> None:
    """Serves until cancelled; cancelling finishes in-flight requests, then returns."""
    from yuxi.api.app import create_app  # the whole API: imported only when serving

    app = create_app(url, settings)
    # Everything imported and built so far lives as long as the process: keep the
    # collector from re-scanning it on every collection (measured: GC time of a large
    # history read 88 -> 12 ms, its p50 230 -> 112 ms; see docs/benchmarks/history.md). The
    # serving commands start with the collector off (startup allocates much and would
    # trigger many collections); it runs from here on.
    gc.freeze()
    gc.enable()
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        # httptools, noting in each request's scope what its connection got instead of
        # the application's response (a client gone: 499; uvicorn's own 400), so that the
        # access log and the metrics count what was sent; draining at shutdown
        http=_DrainingHttp,
        # a request still open this long after SIGTERM is cut (streams end at once)
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    server = _Server(config)
    task = asyncio.ensure_future(server.serve())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        # open streams end now (with a retry hint) instead of holding the exit
        state = getattr(app.state, "yuxi", None)
        if state is not None:
            state.hub.close()
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)
        raise
    except SystemExit:
        raise ListenError(
            f"cannot serve on {settings.host}:{settings.port} (is the port in use?)"
        ) from None
