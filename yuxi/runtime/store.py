"""LangGraph's store, per user: every namespace a user reads or writes is inside their
own (``("users", <uid>, *namespace)`` in LangGraph's ``AsyncPostgresStore``), and the
prefix never reaches them. The ``/lg`` store routes and every graph a worker runs
(``get_store()``, ``runtime.store``) see a user's items through ``UserStore``, so both
show the same items and nobody else's.

This module imports LangGraph: the API loads it with its first store call."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar
from uuid import UUID

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg_pool import AsyncConnectionPool

# the first label of every user's namespaces
USERS = "users"

G = TypeVar("G")


def postgres_store(pool: AsyncConnectionPool[Any]) -> AsyncPostgresStore:
    """LangGraph's store on ``pool`` (its tables are set up by ``yuxi db migrate``)."""
    return AsyncPostgresStore(pool)


def user_prefix(uid: UUID) -> tuple[str, ...]:
    return (USERS, str(uid))


class UserStore(BaseStore):
    """``store`` seen by one user: their namespaces without the prefix."""

    def __init__(self, store: BaseStore, uid: UUID) -> None:
        self.store = store
        self.prefix = user_prefix(uid)

    def _in(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        return (*self.prefix, *namespace)

    def _out(self, namespace: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(namespace[len(self.prefix) :])

    def _op(self, op: Op) -> Op:
        if isinstance(op, GetOp):
            return op._replace(namespace=self._in(op.namespace))
        if isinstance(op, PutOp):
            return op._replace(namespace=self._in(op.namespace))
        if isinstance(op, SearchOp):
            return op._replace(namespace_prefix=self._in(op.namespace_prefix))
        if isinstance(op, ListNamespacesOp):
            conditions = [
                MatchCondition("prefix", self._in(tuple(c.path))) if c.match_type == "prefix" else c
                for c in op.match_conditions or ()
            ]
            if not any(c.match_type == "prefix" for c in conditions):
                conditions.insert(0, MatchCondition("prefix", self.prefix))
            depth = None if op.max_depth is None else op.max_depth + len(self.prefix)
            return op._replace(match_conditions=tuple(conditions), max_depth=depth)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    def _item(self, item: Item) -> Item:
        if isinstance(item, SearchItem):
            return SearchItem(
                self._out(item.namespace),
                item.key,
                item.value,
                item.created_at,
                item.updated_at,
                item.score,
            )
        return Item(
            value=item.value,
            key=item.key,
            namespace=self._out(item.namespace),
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _result(self, op: Op, result: Result) -> Result:
        if isinstance(op, GetOp) and isinstance(result, Item):
            return self._item(result)
        if isinstance(op, SearchOp) and isinstance(result, list):
            return [self._item(item) for item in result if isinstance(item, Item)]
        if isinstance(op, ListNamespacesOp) and isinstance(result, list):
            return [self._out(tuple(ns)) for ns in result if isinstance(ns, tuple | list)]
        return result

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = self.store.batch([self._op(op) for op in ops])
        return [self._result(op, r) for op, r in zip(ops, results, strict=True)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = await self.store.abatch([self._op(op) for op in ops])
        return [self._result(op, r) for op, r in zip(ops, results, strict=True)]


def with_user_store(graph: G, store: BaseStore | None, uid: UUID) -> G:
    """``graph`` (a compiled LangGraph graph, whoever built it) with ``uid``'s store: a
    copy, so a graph a backend shares between runs (and users) is left as it is."""
    from langgraph.pregel import Pregel

    if store is None or not isinstance(graph, Pregel):
        return graph
    return graph.copy(update={"store": UserStore(store, uid)})
