"""Knowledge bases: the caller's own and those shared with them (read-only: writes are
403), their documents (multipart uploads streamed into the file store, ingested by a
worker) and search. Another user's knowledge base that is not shared with the caller is
a 404."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Controller, Request, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.api.auth import User
from yuxi.api.uploads import read_files
from yuxi.knowledge.documents import commit_documents, remove_document, remove_knowledge_base
from yuxi.knowledge.embed import EMBEDDING_MODULES, check_embedding_model
from yuxi.knowledge.search import search
from yuxi.queue.errors import InvalidInput
from yuxi.queue.knowledge import (
    KbDocument,
    KnowledgeBase,
    KnowledgeBasePatch,
    NewKnowledgeBase,
    SearchRequest,
    SearchResults,
    kb_check_write,
    kb_create,
    kb_document_get,
    kb_document_list,
    kb_get,
    kb_list,
    kb_update,
)
from yuxi.runtime.import_thread import import_in_background

Conn = NamedDependency[AsyncConnection[Any]]


class KnowledgeBasesController(Controller):
    path = "/api/knowledge-bases"
    tags = ("knowledge",)

    @post("/", summary="Create a knowledge base")
    async def create(
        self, conn: Conn, user: NamedDependency[User], data: JSONBody[NewKnowledgeBase]
    ) -> KnowledgeBase:
        model = check_embedding_model(data.embedding_model) if data.embedding_model else None
        return await kb_create(
            conn,
            user.uid,
            name=data.name,
            description=data.description,
            embedding_model=model,
            share_scope=data.share_scope,
            shared_with=data.shared_with,
            slug=data.slug,
        )

    @get("/", summary="The knowledge bases the caller may read, their own first")
    async def list_all(self, conn: Conn, user: NamedDependency[User]) -> list[KnowledgeBase]:
        return await kb_list(conn, user.uid)

    @get("/{kb_id:uuid}", summary="A knowledge base")
    async def get_one(
        self, conn: Conn, user: NamedDependency[User], kb_id: FromPath[UUID]
    ) -> KnowledgeBase:
        return await kb_get(conn, user.uid, kb_id)

    @patch("/{kb_id:uuid}", summary="Rename, describe or share a knowledge base (owner only)")
    async def update(
        self,
        conn: Conn,
        user: NamedDependency[User],
        kb_id: FromPath[UUID],
        data: JSONBody[KnowledgeBasePatch],
    ) -> KnowledgeBase:
        if data.embedding_model is not None:
            current = await kb_get(conn, user.uid, kb_id)
            if data.embedding_model != current.embedding_model:
                raise InvalidInput(
                    "the embedding model of a knowledge base is fixed at creation (its chunks"
                    " were embedded by it); create another knowledge base for another model"
                )
        return await kb_update(
            conn,
            user.uid,
            kb_id,
            name=data.name,
            description=data.description,
            share_scope=data.share_scope,
            shared_with=data.shared_with,
        )

    @delete("/{kb_id:uuid}", summary="Delete a knowledge base, its documents and chunks")
    async def remove(
        self, state: State, user: NamedDependency[User], kb_id: FromPath[UUID]
    ) -> None:
        await remove_knowledge_base(state.yuxi.pool, user.uid, kb_id)

    @post(
        "/{kb_id:uuid}/documents",
        status_code=201,
        summary="Upload documents (multipart/form-data, one part named file per file)",
        request_max_body_size=None,  # checked as the body streams in (uploads.py)
    )
    async def upload(
        self,
        request: Request[Any, Any, Any],
        state: State,
        user: NamedDependency[User],
        kb_id: FromPath[UUID],
    ) -> list[KbDocument]:
        settings = state.yuxi.settings
        pool = state.yuxi.pool
        async with pool.connection() as conn:
            await kb_check_write(conn, user.uid, kb_id)  # only its owner writes
        uploads = await read_files(
            request,
            state.yuxi.files,
            user.uid,  # the knowledge base's owner: its tree's contents are theirs
            file_limit=settings.kb_document_max_bytes,
            request_limit=settings.kb_upload_max_bytes,
        )
        return await commit_documents(pool, user.uid, kb_id, uploads)

    @get("/{kb_id:uuid}/documents", summary="The documents of a knowledge base, oldest first")
    async def documents(
        self, conn: Conn, user: NamedDependency[User], kb_id: FromPath[UUID]
    ) -> list[KbDocument]:
        return await kb_document_list(conn, user.uid, kb_id)

    @get("/{kb_id:uuid}/documents/{document_id:uuid}", summary="A document and its status")
    async def document(
        self,
        conn: Conn,
        user: NamedDependency[User],
        kb_id: FromPath[UUID],
        document_id: FromPath[UUID],
    ) -> KbDocument:
        return await kb_document_get(conn, user.uid, kb_id, document_id)

    @delete(
        "/{kb_id:uuid}/documents/{document_id:uuid}", summary="Delete a document and its chunks"
    )
    async def remove_document(
        self,
        state: State,
        user: NamedDependency[User],
        kb_id: FromPath[UUID],
        document_id: FromPath[UUID],
    ) -> None:
        await remove_document(state.yuxi.pool, user.uid, kb_id, document_id)

    @post("/{kb_id:uuid}/search", status_code=200, summary="Hybrid search of one knowledge base")
    async def search(
        self,
        state: State,
        user: NamedDependency[User],
        kb_id: FromPath[UUID],
        data: JSONBody[SearchRequest],
    ) -> SearchResults:
        async with state.yuxi.pool.connection() as conn:
            kb = await kb_get(conn, user.uid, kb_id)  # 404 before embedding anything
        if kb.embedding_model is not None:
            # the embedding client loads off the event loop's thread (about a second,
            # once per process), not in the middle of every other request
            await import_in_background(*EMBEDDING_MODULES)
        hits = await search(state.yuxi.pool, user.uid, [kb_id], data.query, k=data.k)
        return SearchResults(hits)
