"""The model registry: platform models (admins manage them, every user may pick the
enabled ones) and each user's own models with their own keys (BYOK). A key goes in,
sealed at once under the server key; it never comes out (``has_key`` and
``api_key_hint`` only)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from psycopg import AsyncConnection

from yuxi.api.auth import User, require_admin
from yuxi.api.bodies import Body
from yuxi.models.registry import ModelView, model_view, registry_fields, sealed_key
from yuxi.queue.errors import InvalidInput, NotFound
from yuxi.queue.models import model_create, model_delete, model_get, model_list, model_update

Conn = NamedDependency[AsyncConnection[Any]]


class ModelCapabilities(Body):
    streaming: bool | msgspec.UnsetType = msgspec.UNSET
    function_calling: bool | msgspec.UnsetType = msgspec.UNSET
    vision: bool | msgspec.UnsetType = msgspec.UNSET
    json_mode: bool | msgspec.UnsetType = msgspec.UNSET


PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
Price = Annotated[float, msgspec.Meta(ge=0, le=1_000_000)]
BaseUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://\S+$", max_length=500)]


class ModelBody(Body):
    """A model to register (``spec`` and ``name`` required) or the fields to change
    (only those sent; ``null`` clears an optional one, ``api_key: null`` removes the
    key)."""

    spec: str | msgspec.UnsetType = msgspec.UNSET
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | msgspec.UnsetType = (
        msgspec.UNSET
    )
    base_url: BaseUrl | msgspec.UnsetType | None = msgspec.UNSET
    api_key: str | msgspec.UnsetType | None = msgspec.UNSET
    capabilities: ModelCapabilities | msgspec.UnsetType = msgspec.UNSET
    context_window: PositiveInt | msgspec.UnsetType | None = msgspec.UNSET
    max_tokens: PositiveInt | msgspec.UnsetType | None = msgspec.UNSET
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    top_p: Annotated[float, msgspec.Meta(gt=0, le=1)] | msgspec.UnsetType | None = msgspec.UNSET
    price_input_per_mtok: Price | msgspec.UnsetType | None = msgspec.UNSET
    price_output_per_mtok: Price | msgspec.UnsetType | None = msgspec.UNSET
    price_cached_per_mtok: Price | msgspec.UnsetType | None = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET

    def present(self) -> dict[str, Any]:
        """The fields sent, as plain values (``capabilities`` a dict)."""
        sent = {
            f: getattr(self, f)
            for f in self.__struct_fields__
            if getattr(self, f) is not msgspec.UNSET
        }
        if "capabilities" in sent:
            caps = sent["capabilities"]
            sent["capabilities"] = {
                f: getattr(caps, f)
                for f in caps.__struct_fields__
                if getattr(caps, f) is not msgspec.UNSET
            }
        return sent


async def _create(
    state: State, conn: AsyncConnection[Any], owner: UUID | None, body: ModelBody
) -> ModelView:
    sent = body.present()
    if "spec" not in sent or "name" not in sent:
        raise InvalidInput("a model needs spec and name")
    model_id = uuid.uuid4()
    sealed, hint = sealed_key(state.yuxi.secrets, model_id, sent.pop("api_key", None))
    row = await model_create(conn, model_id, owner, registry_fields(sent), sealed=sealed, hint=hint)
    return model_view(row)


async def _update(
    state: State, conn: AsyncConnection[Any], owner: UUID | None, model_id: UUID, body: ModelBody
) -> ModelView:
    sent = body.present()
    set_key = "api_key" in sent
    sealed, hint = sealed_key(state.yuxi.secrets, model_id, sent.pop("api_key", None))
    row = await model_update(
        conn, model_id, owner, registry_fields(sent), set_key=set_key, sealed=sealed, hint=hint
    )
    return model_view(row)


class ModelsController(Controller):
    path = "/api/models"
    tags = ("models",)

    @get("/", summary="The models the caller may pick: platform models, then their own")
    async def list_models(self, conn: Conn, user: NamedDependency[User]) -> list[ModelView]:
        platform = await model_list(conn, None, enabled_only=not user.is_admin)
        own = await model_list(conn, user.uid)
        return [model_view(row) for row in (*platform, *own)]

    @post("/", summary="Register a platform model (admins)")
    async def create(
        self, state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[ModelBody]
    ) -> ModelView:
        require_admin(user, "manage platform models")
        return await _create(state, conn, None, data)

    @get("/{model_id:uuid}", summary="A platform model")
    async def get_one(
        self, conn: Conn, user: NamedDependency[User], model_id: FromPath[UUID]
    ) -> ModelView:
        row = await model_get(conn, model_id, None)
        if not row.enabled and not user.is_admin:
            raise NotFound(f"model {model_id} not found")
        return model_view(row)

    @patch("/{model_id:uuid}", summary="Change a platform model (admins)")
    async def change(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        model_id: FromPath[UUID],
        data: JSONBody[ModelBody],
    ) -> ModelView:
        require_admin(user, "manage platform models")
        return await _update(state, conn, None, model_id, data)

    @delete("/{model_id:uuid}", summary="Remove a platform model (admins)")
    async def remove(
        self, conn: Conn, user: NamedDependency[User], model_id: FromPath[UUID]
    ) -> None:
        require_admin(user, "manage platform models")
        await model_delete(conn, model_id, None)


class MyModelsController(Controller):
    path = "/api/me/models"
    tags = ("models",)

    @get("/", summary="The caller's own models (BYOK)")
    async def list_mine(self, conn: Conn, user: NamedDependency[User]) -> list[ModelView]:
        return [model_view(row) for row in await model_list(conn, user.uid)]

    @post("/", summary="Register a model with your own key")
    async def create(
        self, state: State, conn: Conn, user: NamedDependency[User], data: JSONBody[ModelBody]
    ) -> ModelView:
        return await _create(state, conn, user.uid, data)

    @get("/{model_id:uuid}", summary="One of the caller's models")
    async def get_one(
        self, conn: Conn, user: NamedDependency[User], model_id: FromPath[UUID]
    ) -> ModelView:
        return model_view(await model_get(conn, model_id, user.uid))

    @patch("/{model_id:uuid}", summary="Change one of the caller's models")
    async def change(
        self,
        state: State,
        conn: Conn,
        user: NamedDependency[User],
        model_id: FromPath[UUID],
        data: JSONBody[ModelBody],
    ) -> ModelView:
        return await _update(state, conn, user.uid, model_id, data)

    @delete("/{model_id:uuid}", summary="Remove one of the caller's models")
    async def remove(
        self, conn: Conn, user: NamedDependency[User], model_id: FromPath[UUID]
    ) -> None:
        await model_delete(conn, model_id, user.uid)
