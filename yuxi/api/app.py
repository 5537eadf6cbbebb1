"""The litestar application: routes, auth, error mapping, OpenAPI at /schema."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.di import Provide
from litestar.logging import LoggingConfig
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ASGIApp

from yuxi.api.access_log import AccessLog
from yuxi.api.cors import Cors
from yuxi.api.dependencies import caller, connection
from yuxi.api.errors import EXCEPTION_HANDLERS
from yuxi.api.event_hub import EventHub
from yuxi.api.lg import lg_router
from yuxi.api.limits import refuse_deep_json
from yuxi.api.metrics import HttpMetrics
from yuxi.api.routes.agents import AgentsController
from yuxi.api.routes.console import console_files, console_login, console_page, me
from yuxi.api.routes.credits import CreditsController
from yuxi.api.routes.files import FilesController
from yuxi.api.routes.knowledge import KnowledgeBasesController
from yuxi.api.routes.mcp_servers import McpServersController
from yuxi.api.routes.metrics import metrics
from yuxi.api.routes.models import ModelsController, MyModelsController
from yuxi.api.routes.projects import ProjectsController
from yuxi.api.routes.requests import RequestEventsController
from yuxi.api.routes.runs import RunsController
from yuxi.api.routes.scheduling import ScheduledJobsController
from yuxi.api.routes.skills import SkillsController
from yuxi.api.routes.system import health
from yuxi.api.routes.threads import ThreadsController
from yuxi.api.routes.usage import UsageController
from yuxi.api.routes.users import UsersController
from yuxi.api.routes.workspace import WorkspaceController
from yuxi.api.state import AppState
from yuxi.db.pools import app_pool, checkpointer_pool, store_pool
from yuxi.files.store import PostgresFileStore
from yuxi.models.secret_box import SecretBox
from yuxi.resources import DatabaseCatalog
from yuxi.settings import Settings

log = logging.getLogger("yuxi.api")


def create_app(url: str, settings: Settings, *, count_requests: bool = True) -> Litestar:
    """The API bound to the database at ``url``; pools open with the app's lifespan.
    ``count_requests=False`` leaves out the HTTP metrics (the baseline of
    tests/bench/metrics_overhead.py)."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        # through a transaction pooler (YUXI_API_DATABASE_URL) a session is not the
        # API's own: no server-side prepared statements there
        pool = app_pool(
            settings.api_database_url or url,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            timeout=settings.pool_timeout_seconds,
            prepared_statements=settings.api_database_url is None,
        )
        saver_pool = checkpointer_pool(url, max_size=4)
        items_pool = store_pool(url, max_size=4)
        hub = EventHub(url)
        await pool.open()
        await saver_pool.open()
        await items_pool.open()
        await hub.start()
        if settings.graphs is not None:
            # a langgraph.json project: its graphs' backends and agents (nothing imported)
            from yuxi.runtime.graphs import serve_graphs

            await serve_graphs(pool, settings.graphs)
        app.state.yuxi = AppState(
            settings,
            pool,
            saver_pool,
            hub,
            DatabaseCatalog(pool),
            SecretBox.from_env(settings.home),
            PostgresFileStore(pool),
            items_pool,
        )
        try:
            yield
        finally:
            await hub.stop()
            await items_pool.close()
            await saver_pool.close()
            await pool.close()

    app = Litestar(
        route_handlers=[
            health,
            metrics,
            AgentsController,
            ProjectsController,
            ThreadsController,
            FilesController,
            ModelsController,
            MyModelsController,
            KnowledgeBasesController,
            SkillsController,
            McpServersController,
            RunsController,
            RequestEventsController,
            ScheduledJobsController,
            UsersController,
            UsageController,
            CreditsController,
            WorkspaceController,
            # the web console: GET /, /console/*, its login-link exchange, the caller
            console_page,
            console_files(),
            console_login,
            me,
            # the LangGraph Platform-compatible subset (docs/langgraph.md)
            lg_router(settings.lg_prefix),
        ],
        dependencies={"conn": Provide(connection), "user": Provide(caller)},
        before_request=refuse_deep_json,
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        lifespan=[lifespan],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="yuxi",
            version="0.1.0",
            path="/schema",
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer"),
                    # the /lg routes also take the token as x-api-key (the LangGraph SDK's)
                    "apiKey": SecurityScheme(
                        type="apiKey", name="x-api-key", security_scheme_in="header"
                    ),
                }
            ),
            security=[{"bearer": []}],
        ),
        # the root logger is the process's (yuxi's CLI sets it from YUXI_LOG_LEVEL)
        logging_config=LoggingConfig(configure_root_logger=False, log_exceptions="never"),
    )
    # around litestar's own error handling: errors and streams carry CORS headers too
    handler: ASGIApp = app.asgi_handler
    if settings.cors_origins:
        handler = Cors(handler, settings.cors_origins)
    if count_requests:
        handler = HttpMetrics(handler)
    # outermost: every response is logged
    app.asgi_handler = AccessLog(handler)
    return app
