"""Runs and requests: submit, resume, cancel, steer, continue, read, stream."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.params import FromPath, JSONBody, Parameter
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.bodies import Body
from yuxi.api.dependencies import bearer_of
from yuxi.api.event_hub import Subscription
from yuxi.api.run_stream import STREAM_PAGE, Ended, follow_run
from yuxi.api.sse import EventStream, sse_message
from yuxi.files.attachments import attaching, image_extension, stage_bytes
from yuxi.models.registry import check_model_usable
from yuxi.queue.attachments import message_refer_attachments
from yuxi.queue.errors import InvalidInput, NotFound, PayloadTooLarge
from yuxi.queue.events import StreamRead, run_end_event, run_stream_open
from yuxi.queue.files import thread_file_tree
from yuxi.queue.requests import (
    RequestInfo,
    request_cancel,
    request_get,
    request_steer,
    request_submit,
)
from yuxi.queue.runs import (
    Run,
    run_get,
    run_get_manifest,
    run_request_cancel,
    run_result,
    run_resume,
    run_usage,
)
from yuxi.queue.threads import (
    ThreadQueue,
    thread_continue,
    thread_get,
    thread_queue,
    thread_requests,
)
from yuxi.queue.users import bearer_user

Conn = NamedDependency[AsyncConnection[Any]]
MAX_SEQ = 2**63 - 1  # event seqs are bigint


class SubmitRun(Body):
    thread_id: UUID
    query: str
    request_id: str | None = None
    queue_policy: Literal["enqueue", "reject", "steer"] = "enqueue"
    # an image for this message (base64, or a data: URL), stored as an attachment
    image_content: str | None = None
    # ids of this thread's attachments the message refers to (each must exist)
    attachments: list[UUID] | None = None
    model_spec: str | None = None
    tool_approval_mode: Literal["auto", "ask"] | None = None


class ResumeRun(Body):
    resume: Any
    request_id: str | None = None


class RequestView(msgspec.Struct, frozen=True):
    request_id: str
    thread_id: UUID
    status: str
    queue_policy: str
    queue_position: int | None
    message_id: int | None
    run_id: UUID | None
    stream_url: str | None
    created_at: datetime


class RunTiming(msgspec.Struct, frozen=True):
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class RunView(msgspec.Struct, frozen=True):
    run_id: UUID
    thread_id: UUID
    request_id: str
    run_type: str
    created_by_run_id: UUID | None
    status: str
    error_type: str | None
    error_message: str | None
    timing: RunTiming
    usage: dict[str, Any] | None = None
    # attempts so far, and those of them given back for causes outside the agent
    attempt_count: int = 0
    infra_retries: int = 0


class RunError(msgspec.Struct, frozen=True):
    type: str | None
    message: str | None


class RunResult(msgspec.Struct, frozen=True):
    status: str
    output: str | None
    final_message_id: int | None
    error: RunError | None
    # {input_tokens, output_tokens, total_tokens, cost, by_model, …}; null until recorded
    usage: dict[str, Any] | None = None


class QueueState(msgspec.Struct, frozen=True):
    status: str
    paused_reason: str | None
    blocking_run_id: UUID | None
    can_continue: bool


class ThreadRequests(msgspec.Struct, frozen=True):
    requests: list[RequestView]
    queue: QueueState


class ContinueResult(msgspec.Struct, frozen=True):
    thread_id: UUID
    run_id: UUID | None
    queue: QueueState


class CancelResult(msgspec.Struct, frozen=True):
    run_id: UUID
    status: str


def request_view(info: RequestInfo) -> RequestView:
    return RequestView(
        request_id=info.request_id,
        thread_id=info.thread_id,
        status=info.status,
        queue_policy=info.queue_policy,
        queue_position=info.queue_position,
        message_id=info.message_id,
        run_id=info.run_id,
        stream_url=f"/api/agent/runs/{info.run_id}/events" if info.run_id else None,
        created_at=info.created_at,
    )


def run_view(run: Run) -> RunView:
    return RunView(
        run_id=run.run_id,
        thread_id=run.thread_id,
        request_id=run.request_id,
        run_type=run.run_type,
        created_by_run_id=run.created_by_run_id,
        status=run.status,
        error_type=run.error_type,
        error_message=run.error_message,
        timing=RunTiming(run.created_at, run.started_at, run.finished_at),
        attempt_count=run.attempt_count,
        infra_retries=run.infra_retries,
    )


async def submit_with_files(
    state: State, conn: AsyncConnection[Any], user: User, data: SubmitRun
) -> RequestInfo:
    """A submit whose body carries an image (stored as an attachment of the thread, in
    its workdir tree of the file store) or names attachments (each must be the
    thread's): one transaction records and links the image, submits and records on the
    message what it refers to, so a refused submit leaves no file behind."""
    settings = state.yuxi.settings
    images = []
    tree = None
    if data.image_content is not None:
        image = decode_image(data.image_content, limit=settings.attachment_max_bytes)
        tree = await thread_file_tree(conn, user.uid, data.thread_id)  # 404 for another's
        name = f"image-{hashlib.sha256(image).hexdigest()[:12]}.{image_extension(image)}"
        # written in the transaction, on this connection: no other one is needed
        images.append(stage_bytes(name, image, limit=settings.attachment_max_bytes))
    async with attaching(
        conn,
        user.uid,
        data.thread_id,
        tree,
        images,
        thread_limit=settings.thread_attachments_max_bytes,
    ) as added:
        info = await request_submit(
            conn,
            uid=user.uid,
            thread_id=data.thread_id,
            query=data.query,
            request_id=data.request_id,
            queue_policy=data.queue_policy,
            model_spec=data.model_spec,
            tool_approval_mode=data.tool_approval_mode,
        )
        # the message keeps what it refers to (each id must be the thread's): a model
        # with vision gets these images
        referred = [*(data.attachments or []), *(row.id for row in added)]
        if info.message_id is not None:
            await message_refer_attachments(conn, user.uid, info.message_id, referred)
        return info


def decode_image(content: str, *, limit: int) -> bytes:
    """A run body's ``image_content``: base64, or a ``data:image/...;base64,`` URL, of a
    PNG, JPEG, GIF or WebP image of at most ``limit`` bytes."""
    text = content.strip()
    if text.startswith("data:"):
        header, comma, text = text.partition(",")
        if not comma or not header.endswith(";base64"):
            raise InvalidInput(
                "image_content as a data: URL must be base64 (data:image/png;base64,...)"
            )
    if len(text) > (limit * 4) // 3 + 4:
        raise PayloadTooLarge(f"image_content is larger than the {limit} bytes a file may have")
    try:
        image = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("image_content is not valid base64") from None
    if image_extension(image) is None:
        raise InvalidInput("image_content is not a PNG, JPEG, GIF or WebP image")
    return image


class RunsController(Controller):
    path = "/api/agent"
    tags = ("runs",)

    @post("/runs", status_code=202, summary="Submit a message to a conversation's queue")
    async def submit(
        self,
        state: State,
        conn: Conn,
        request: Request[object, object, State],
        data: JSONBody[SubmitRun],
    ) -> RequestView:
        bearer = bearer_of(request)
        if data.model_spec is not None or data.image_content is not None or data.attachments:
            user = await bearer_user(conn, bearer)
            if data.model_spec is not None:  # 400 invalid_model before anything is stored
                await check_model_usable(conn, user.uid, data.model_spec)
            if data.image_content is not None or data.attachments:
                return request_view(await submit_with_files(state, conn, user, data))
        # the token is checked by the submit's own statement
        info = await request_submit(
            conn,
            uid=bearer,
            thread_id=data.thread_id,
            query=data.query,
            request_id=data.request_id,
            queue_policy=data.queue_policy,
            model_spec=data.model_spec,
            tool_approval_mode=data.tool_approval_mode,
        )
        return request_view(info)

    @post("/runs/{run_id:uuid}/resume", status_code=202, summary="Resume an interrupted run")
    async def resume(
        self,
        conn: Conn,
        user: NamedDependency[User],
        run_id: FromPath[UUID],
        data: JSONBody[ResumeRun],
    ) -> RequestView:
        info = await run_resume(
            conn, run_id, resume=data.resume, uid=user.uid, request_id=data.request_id
        )
        return request_view(info)

    @get("/runs/{run_id:uuid}", summary="A run")
    async def get_one(
        self, conn: Conn, user: NamedDependency[User], run_id: FromPath[UUID]
    ) -> RunView:
        view = run_view(await run_get(conn, run_id, uid=user.uid))
        return msgspec.structs.replace(view, usage=await run_usage(conn, run_id))

    @get("/runs/{run_id:uuid}/result", summary="A run's outcome")
    async def result(
        self, conn: Conn, request: Request[object, object, State], run_id: FromPath[UUID]
    ) -> RunResult:
        row = await run_result(conn, run_id, uid=bearer_of(request))
        error = None
        if row.error_type or row.error_message:
            error = RunError(type=row.error_type, message=row.error_message)
        return RunResult(
            status=row.status,
            output=row.output,
            final_message_id=row.final_message_id,
            error=error,
            usage=row.usage,
        )

    @post("/runs/{run_id:uuid}/cancel", status_code=200, summary="Cancel a run and its children")
    async def cancel(
        self, conn: Conn, user: NamedDependency[User], run_id: FromPath[UUID]
    ) -> CancelResult:
        status = await run_request_cancel(conn, run_id, uid=user.uid)
        return CancelResult(run_id=run_id, status=status)

    @get(
        "/runs/{run_id:uuid}/manifest",
        summary="The run's committed manifest; its stored fingerprint is the ETag",
    )
    async def manifest(
        self, conn: Conn, user: NamedDependency[User], run_id: FromPath[UUID]
    ) -> Response[dict[str, Any]]:
        committed = await run_get_manifest(conn, run_id, uid=user.uid)
        if committed is None:
            raise NotFound(f"run {run_id} has no manifest yet")
        # write-once, so the fingerprint is a strong validator of the body
        return Response(committed.manifest, headers={"ETag": f'"{committed.manifest_fingerprint}"'})

    @get("/runs/{run_id:uuid}/events", summary="The run's events as Server-Sent Events")
    async def events(
        self,
        state: State,
        conn: Conn,
        request: Request[object, object, State],
        run_id: FromPath[UUID],
        after_seq: Annotated[int | None, Parameter(ge=0, le=MAX_SEQ)] = None,
    ) -> EventStream:
        """``id:`` is the event's seq. A stream from the start (no ``Last-Event-ID``, no
        ``?after_seq=``) begins with ``init`` (id 0): the run's input as stored. Resumes
        after ``Last-Event-ID`` or ``?after_seq=``; ends after exactly one ``end`` event."""
        bearer = bearer_of(request)
        last_event_id = request.headers.get("last-event-id")
        after = after_seq or 0
        if last_event_id:
            try:
                seen = int(last_event_id)
            except ValueError:
                seen = -1
            if not 0 <= seen <= MAX_SEQ:
                raise ValidationException("Last-Event-ID must be an event seq")
            after = max(after, seen)
        # subscribed before the first read: what is committed after it notifies the stream
        subscription = state.yuxi.hub.listen(run_id)
        try:
            # the first read (the init event of a stream from the start, and the events
            # stored so far) also refuses others' runs (404) before streaming
            first = await run_stream_open(
                conn,
                run_id,
                uid=bearer,
                after=after,
                limit=STREAM_PAGE,
                init=last_event_id is None and after_seq is None,
            )
        except BaseException:
            subscription.close()
            raise
        return EventStream(_stream(state, run_id, after, first, subscription))

    @get("/requests/{request_id:str}", summary="A request")
    async def get_request_view(
        self, conn: Conn, user: NamedDependency[User], request_id: FromPath[str]
    ) -> RequestView:
        return request_view(await request_get(conn, request_id, uid=user.uid))

    @post("/requests/{request_id:str}/cancel", status_code=200, summary="Cancel a queued request")
    async def cancel_queued(
        self, conn: Conn, user: NamedDependency[User], request_id: FromPath[str]
    ) -> RequestView:
        return request_view(await request_cancel(conn, request_id, uid=user.uid))

    @post(
        "/requests/{request_id:str}/steer",
        status_code=200,
        summary="Make a queued request run next",
    )
    async def steer(
        self, conn: Conn, user: NamedDependency[User], request_id: FromPath[str]
    ) -> RequestView:
        return request_view(await request_steer(conn, request_id, uid=user.uid))

    @get("/thread/{thread_id:uuid}/requests", summary="A conversation's requests and queue state")
    async def requests_of_thread(
        self, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> ThreadRequests:
        await thread_get(conn, user.uid, thread_id)
        requests = await thread_requests(conn, user.uid, thread_id)
        queue = await thread_queue(conn, thread_id)
        return ThreadRequests(requests=[request_view(r) for r in requests], queue=_queue(queue))

    @post(
        "/thread/{thread_id:uuid}/requests/continue",
        status_code=200,
        summary="Resume a backlog paused by a failed or cancelled run",
    )
    async def continue_backlog(
        self, conn: Conn, user: NamedDependency[User], thread_id: FromPath[UUID]
    ) -> ContinueResult:
        run_id = await thread_continue(conn, thread_id, uid=user.uid)
        queue = await thread_queue(conn, thread_id)
        return ContinueResult(thread_id=thread_id, run_id=run_id, queue=_queue(queue))


def _queue(queue: ThreadQueue | None) -> QueueState:
    if queue is None:
        raise NotFound("thread not found")
    return QueueState(
        status=queue.status,
        paused_reason=queue.paused_reason,
        blocking_run_id=queue.blocking_run_id,
        can_continue=queue.can_continue,
    )


async def _stream(
    state: State,
    run_id: UUID,
    after: int,
    first: list[StreamRead],
    subscription: Subscription,
) -> AsyncIterator[bytes]:
    app = state.yuxi
    async with aclosing(follow_run(app, run_id, subscription, after, first)) as followed:
        async for item in followed:
            if isinstance(item, bytes):
                yield item
            elif isinstance(item, Ended):
                # the client is already past the end (send that same end again), or the
                # run was ended by hand
                async with app.pool.connection() as conn:
                    end = await run_end_event(conn, run_id)
                if end is not None:
                    yield sse_message(json.dumps(end.payload), event="end", id=end.seq)
                else:  # only a run ended by hand, outside the queue's functions
                    yield sse_message(
                        json.dumps({"status": item.status}), event="end", id=item.last_seq
                    )
            else:
                seq, event, payload = item
                yield sse_message(payload, event=event, id=seq)
