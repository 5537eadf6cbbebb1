"""The store routes: LangGraph's own ``AsyncPostgresStore`` in yuxi's database, each
user in their own namespaces (``yuxi.runtime.store.UserStore``), which are also what
the graphs a worker runs see through ``get_store()``. LangGraph loads with the first
call (``AppState.store``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from litestar import Request, delete, get, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromQuery, JSONBody

from yuxi.api.lg.errors import Refused
from yuxi.api.limits import check_json_depth
from yuxi.queue.callers import User
from yuxi.queue.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore, Item


async def _store(state: State, user: User) -> BaseStore:
    from yuxi.runtime.store import UserStore

    return UserStore(await state.yuxi.store(), user.uid)


def _namespace(value: Any, what: str = "namespace", *, empty: bool = False) -> tuple[str, ...]:
    """A namespace as the SDK sends it: a list of labels (strings without ``.``)."""
    if value is None and empty:
        return ()
    if not isinstance(value, list | tuple) or (not value and not empty):
        raise InvalidInput(f"{what} must be a non-empty list of strings")
    for label in value:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidInput(f"{what} labels are non-empty strings without '.', not {label!r}")
    if value and value[0] == "langgraph" and not empty:
        raise InvalidInput(f'the first label of a {what} cannot be "langgraph"')
    return tuple(value)


def _key(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput("key must be a non-empty string")
    return value


def _page(data: dict[str, Any], limit: int) -> tuple[int, int]:
    limit, offset = data.get("limit", limit), data.get("offset", 0)
    if (
        not isinstance(limit, int)
        or not isinstance(offset, int)
        or isinstance(limit, bool)
        or limit < 0
        or offset < 0
    ):
        raise InvalidInput("limit and offset must be non-negative integers")
    return min(limit, 1000), offset


def _item(item: Item) -> dict[str, Any]:
    view = {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    }
    score = getattr(item, "score", None)
    if score is not None:
        view["score"] = score
    return view


@put("/store/items", status_code=204, summary="Store an item", tags=["langgraph"])
async def put_item(
    state: State, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> None:
    namespace, key = _namespace(data.get("namespace")), _key(data.get("key"))
    value = data.get("value")
    if not isinstance(value, dict):
        raise InvalidInput("value must be an object")
    if data.get("ttl") is not None:
        raise Refused("ttl: items do not expire here (no TTL sweeper)")
    index = data.get("index")
    if index is not None and index is not False and not isinstance(index, list):
        raise InvalidInput("index must be false or a list of fields")
    await (await _store(state, user)).aput(namespace, key, value)


@get("/store/items", summary="An item", tags=["langgraph"])
async def get_item(
    state: State,
    user: NamedDependency[User],
    key: FromQuery[str],
    namespace: FromQuery[str] = "",
) -> dict[str, Any]:
    labels = _namespace(namespace.split(".") if namespace else [])
    item = await (await _store(state, user)).aget(labels, _key(key))
    if item is None:
        raise NotFound(f"no item {key!r} in namespace {list(labels)}")
    return _item(item)


@delete("/store/items", status_code=204, summary="Delete an item", tags=["langgraph"])
async def delete_item(
    state: State, user: NamedDependency[User], request: Request[Any, Any, Any]
) -> None:
    # a DELETE's body is not decoded for the route (no ``data``): read here, with the
    # depth check every decoded body gets (yuxi.api.limits)
    raw = await request.body()
    try:
        check_json_depth(raw)
        data = json.loads(raw or b"null")
    except ValueError as error:
        raise InvalidInput(f"the body must be JSON: {error}") from None
    if not isinstance(data, dict):
        raise InvalidInput("the body must be an object {namespace, key}")
    namespace, key = _namespace(data.get("namespace")), _key(data.get("key"))
    await (await _store(state, user)).adelete(namespace, key)


@post("/store/items/search", status_code=200, summary="Search items", tags=["langgraph"])
async def search_items(
    state: State, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> dict[str, Any]:
    prefix = _namespace(data.get("namespace_prefix"), "namespace_prefix", empty=True)
    limit, offset = _page(data, 10)
    where = data.get("filter")
    if where is not None and not isinstance(where, dict):
        raise InvalidInput("filter must be an object")
    if data.get("query"):
        raise Refused("query: the store has no semantic index; search with filter")
    items = await (await _store(state, user)).asearch(
        prefix, filter=where, limit=limit, offset=offset
    )
    return {"items": [_item(item) for item in items]}


@post("/store/namespaces", status_code=200, summary="List namespaces", tags=["langgraph"])
async def list_namespaces(
    state: State, user: NamedDependency[User], data: JSONBody[dict[str, Any]]
) -> dict[str, Any]:
    prefix = _namespace(data.get("prefix"), "prefix", empty=True)
    suffix = _namespace(data.get("suffix"), "suffix", empty=True)
    limit, offset = _page(data, 100)
    depth = data.get("max_depth")
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
        raise InvalidInput("max_depth must be a positive integer")
    found = await (await _store(state, user)).alist_namespaces(
        prefix=prefix or None, suffix=suffix or None, max_depth=depth, limit=limit, offset=offset
    )
    return {"namespaces": [list(ns) for ns in found]}
