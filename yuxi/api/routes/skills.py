"""Skills: shared skills (admins upload them as a ZIP of the skill's directory; each
upload whose files differ adds an immutable version) and the caller's personal skills
(``skills/<slug>/SKILL.md`` of their workspace in the file store). A shared skill the
caller may not use is a 404; a personal skill with the same slug shadows it in the
caller's runs."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import msgspec
import multipart  # type: ignore[import-untyped]
from litestar import Controller, Request, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from psycopg import AsyncConnection

from yuxi.api.auth import User, require_admin
from yuxi.queue.errors import InvalidInput, NotFound, PayloadTooLarge
from yuxi.queue.skills import SkillInfo, skill_delete, skill_files, skill_versions, skills_usable
from yuxi.skills.format import MAX_BYTES
from yuxi.skills.resolve import SkillRecord
from yuxi.skills.store import (
    add_shared_skill,
    bundle_of_zip,
    place_personal_skill,
    remove_personal_skill,
    user_personal_skills,
)

Conn = NamedDependency[AsyncConnection[Any]]
# a ZIP of at most MAX_BYTES of files, plus its headers and a multipart envelope
MAX_UPLOAD = MAX_BYTES + 1024 * 1024
SHARE_SCOPES = ("owner", "selected", "all")


class SkillDepends(msgspec.Struct, frozen=True):
    skills: list[str]
    tools: list[str]
    mcps: list[str]


class SkillView(msgspec.Struct, frozen=True):
    """A skill as the API shows it. ``source``: shared or personal; ``shadowed``: a
    shared skill the caller's personal skill of the same slug replaces in their runs."""

    slug: str
    source: str
    description: str
    version: int | None
    sha256: str | None
    depends: SkillDepends
    files: int | None = None
    bytes: int | None = None
    share_scope: str | None = None
    shared_with: list[UUID] | None = None
    shadowed: bool = False


class SkillVersionView(msgspec.Struct, frozen=True):
    version: int
    sha256: str
    description: str
    files: int
    bytes: int
    created_at: str


class SkillFileView(msgspec.Struct, frozen=True):
    path: str
    bytes: int


class SkillDetail(msgspec.Struct, frozen=True):
    skill: SkillView
    versions: list[SkillVersionView]
    files: list[SkillFileView]


class SkillAddedView(msgspec.Struct, frozen=True):
    """``version`` null for a personal skill (it has none)."""

    slug: str
    version: int | None
    sha256: str
    created: bool
    source: str


def _shared(info: SkillInfo, shadowed: bool, admin: bool) -> SkillView:
    return SkillView(
        slug=info.slug,
        source="shared",
        description=info.description,
        version=info.version,
        sha256=info.sha256,
        depends=SkillDepends(info.depends_skills, info.depends_tools, info.depends_mcps),
        files=info.files,
        bytes=info.bytes,
        share_scope=info.share_scope,
        shared_with=info.shared_with if admin else None,
        shadowed=shadowed,
    )


def _personal(record: SkillRecord) -> SkillView:
    return SkillView(
        slug=record.slug,
        source="personal",
        description=record.description,
        version=None,
        sha256=record.sha256,
        depends=SkillDepends(list(record.skills), list(record.tools), list(record.mcps)),
    )


async def _upload_bytes(request: Request[Any, Any, Any]) -> bytes:
    """The ZIP: the raw body (application/zip) or the part named ``file`` of a
    multipart/form-data body; refused past MAX_UPLOAD bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_UPLOAD:
        raise PayloadTooLarge(f"a skill upload is at most {MAX_UPLOAD} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_UPLOAD:
            raise PayloadTooLarge(f"a skill upload is at most {MAX_UPLOAD} bytes")
    kind, options = multipart.parse_options_header(request.headers.get("content-type", ""))
    if kind != "multipart/form-data":
        return bytes(body)
    boundary = options.get("boundary")
    if not boundary:
        raise InvalidInput("a multipart/form-data body needs a boundary")
    try:
        parser = multipart.MultipartParser(
            _Reader(bytes(body)),
            boundary,
            content_length=len(body),
            memory_limit=MAX_UPLOAD,
            spool_limit=MAX_UPLOAD,
        )
        for part in parser:
            if part.name == "file":
                return bytes(part.raw)
    except multipart.MultipartError as error:
        raise InvalidInput(f"the multipart/form-data body is malformed: {error}") from None
    raise InvalidInput("send the skill as a ZIP: the body, or a multipart part named file")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        chunk = bytes(self._data[self._at : end])
        self._at += len(chunk)
        return chunk


def _shared_with(raw: str | None) -> list[UUID] | None:
    if raw is None:
        return None
    try:
        return [UUID(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        raise InvalidInput("shared_with is a comma-separated list of user ids") from None


class SkillsController(Controller):
    path = "/api/skills"
    tags = ("skills",)

    @post(
        "/",
        status_code=201,
        summary="Upload a skill: a ZIP of its directory, raw or in a part file (shared: admins)",
        request_max_body_size=None,  # bounded as it streams in (MAX_UPLOAD)
    )
    async def upload(
        self,
        request: Request[Any, Any, Any],
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        share_scope: FromQuery[str | None] = None,
        shared_with: FromQuery[str | None] = None,
        personal: FromQuery[bool] = False,
    ) -> SkillAddedView:
        if not personal:
            require_admin(user, "upload shared skills")
        if share_scope is not None and share_scope not in SHARE_SCOPES:
            raise InvalidInput("share_scope is owner, selected or all")
        found = await asyncio.to_thread(bundle_of_zip, await _upload_bytes(request))
        if personal:
            # into the caller's workspace in the store, skills/<slug>/ (their dependencies
            # checked), in one transaction
            shared = await skills_usable(conn, user.uid)
            await place_personal_skill(
                conn, state.yuxi.files, user.uid, found, shared, writer_uid=user.uid
            )
            return SkillAddedView(found.meta.name, None, found.sha256, True, "personal")
        added = await add_shared_skill(
            conn,
            user.uid,
            found,
            share_scope=share_scope,
            shared_with=_shared_with(shared_with),
        )
        return SkillAddedView(added.slug, added.version, added.sha256, added.created, "shared")

    @get("/", summary="The skills the caller may use: shared ones, then their personal ones")
    async def list_all(
        self, state: State, conn: Conn, user: NamedDependency[User]
    ) -> list[SkillView]:
        personal = await user_personal_skills(state.yuxi.files, user.uid)
        mine = {record.slug for record in personal}
        shared = await skills_usable(conn, user.uid)
        return [_shared(info, info.slug in mine, user.is_admin) for info in shared] + [
            _personal(record) for record in personal
        ]

    @get("/{slug:str}", summary="A shared skill: its latest version, every version, its files")
    async def get_one(
        self, state: State, conn: Conn, user: NamedDependency[User], slug: FromPath[str]
    ) -> SkillDetail:
        return await _detail(state, conn, user, slug, None)

    @get("/{slug:str}/versions/{version:int}", summary="One version of a shared skill")
    async def get_version(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        slug: FromPath[str],
        version: FromPath[int],
    ) -> SkillDetail:
        if not 1 <= version <= 2**31 - 1:
            raise NotFound(f"skill {slug} version {version} not found")
        return await _detail(state, conn, user, slug, version)

    @delete(
        "/{slug:str}",
        summary="Delete a shared skill and every version (admins), or a personal one",
    )
    async def remove(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        slug: FromPath[str],
        personal: FromQuery[bool] = False,
    ) -> None:
        if personal:
            if not await remove_personal_skill(state.yuxi.files, user.uid, slug):
                raise NotFound(f"personal skill {slug} not found")
            return
        require_admin(user, "delete shared skills")
        await skill_delete(conn, user.uid, slug)


async def _detail(
    state: State, conn: AsyncConnection[Any], user: User, slug: str, version: int | None
) -> SkillDetail:
    infos = [i for i in await skills_usable(conn, user.uid) if i.slug == slug]
    if not infos:
        raise NotFound(f"skill {slug} not found")
    personal = await user_personal_skills(state.yuxi.files, user.uid, only=slug)
    shadowed = any(record.slug == slug for record in personal)
    versions = await skill_versions(conn, user.uid, slug)
    files = await skill_files(conn, user.uid, slug, version)
    return SkillDetail(
        skill=_shared(infos[0], shadowed, user.is_admin),
        versions=[
            SkillVersionView(
                v.version, v.sha256, v.description, v.files, v.bytes, v.created_at.isoformat()
            )
            for v in versions
        ],
        files=[SkillFileView(f.path, len(f.content)) for f in files],
    )
