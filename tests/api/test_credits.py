"""Budgets over HTTP with a real worker: admins top up, a run on a priced platform model
is frozen at its claim and charged its recorded cost at its end, a run the balance
cannot cover fails with insufficient_credits before any model call, and a further model
call the balance cannot cover is refused."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.api.conftest import Api, error_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

# the scripted model at 1 credit per token in and out; max_tokens 1000 freezes 2000 a
# call (its calls here cost a few hundred: the prompt is most of it)
PRICED = {
    "spec": "builtin:scripted",
    "name": "Scripted, priced",
    "max_tokens": 1000,
    "price_input_per_mtok": 1_000_000,
    "price_output_per_mtok": 1_000_000,
}
ESTIMATE = Decimal(2000)


async def _price_the_model(api: Api) -> None:
    response = await api.admin.post("/api/models", json=PRICED)
    assert response.status_code in (201, 409), response.text


async def _credits(api: Api, who: str = "alice") -> dict[str, Any]:
    response = await api.clients[who].get("/api/me/credits")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _set_balance(api: Api, who: str, target: Decimal) -> None:
    current = Decimal(str((await _credits(api, who)).get("balance") or 0))
    if current != target:
        response = await api.admin.post(
            f"/api/users/{api.uids[who]}/credits", json={"amount": str(target - current)}
        )
        assert response.status_code == 200, response.text


async def _run(api: Api, query: str, who: str = "alice") -> dict[str, Any]:
    thread = await api.thread(who)
    request = await api.submit(thread, query, who=who)
    view = await api.wait_dispatched(request["request_id"], who=who)
    run = await api.wait_run(view["run_id"], who=who)
    return {"run": run, **(await api.result(view["run_id"], who=who))}


async def test_admins_top_up_and_everyone_reads_their_own(api: Api) -> None:
    # amounts are decimal strings: exact, whatever the client's numbers are
    assert await _credits(api, "bob") == {
        "budget": False,
        "balance": None,
        "frozen": "0",
        "ledger": [],
    }
    bob = api.uids["bob"]
    topped = await api.admin.post(
        f"/api/users/{bob}/credits", json={"amount": 12.5, "reason": "welcome"}
    )
    assert topped.status_code == 200, topped.text
    body = topped.json()
    assert body["budget"] is True and body["balance"] == "12.50000000"
    [row] = body["ledger"]
    assert row["kind"] == "topup" and row["reason"] == "welcome"
    assert row["actor_uid"] == str(api.uids["admin"])
    lowered = await api.admin.post(f"/api/users/{bob}/credits", json={"amount": "-2.5"})
    assert Decimal(str(lowered.json()["balance"])) == Decimal(10)
    mine = await _credits(api, "bob")
    assert Decimal(str(mine["balance"])) == 10 and [r["kind"] for r in mine["ledger"]] == [
        "adjust",
        "topup",
    ]
    assert (await api.admin.get(f"/api/users/{bob}/credits")).json() == mine

    error_of(
        await api.admin.post(f"/api/users/{bob}/credits", json={"amount": -11}),
        409,
        "insufficient_credits",
    )
    error_of(
        await api.admin.post(f"/api/users/{bob}/credits", json={"amount": 0}), 400, "invalid_input"
    )
    error_of(await api.admin.post(f"/api/users/{bob}/credits", json={"amount": "lots"}), 400)
    error_of(await api.admin.post(f"/api/users/{bob}/credits", json={"amount": 1, "x": 1}), 400)
    error_of(
        await api.admin.post(
            "/api/users/00000000-0000-0000-0000-000000000000/credits", json={"amount": 1}
        ),
        404,
        "not_found",
    )
    # amounts stay exact past what a float holds
    big = await api.admin.post(
        f"/api/users/{bob}/credits", json={"amount": "123456789012.12345678"}
    )
    assert big.json()["balance"] == "123456789022.12345678"
    await api.admin.post(f"/api/users/{bob}/credits", json={"amount": "-123456789012.12345678"})
    # users manage nobody's credits, not even their own
    error_of(await api.bob.post(f"/api/users/{bob}/credits", json={"amount": 5}), 403)
    error_of(await api.bob.get(f"/api/users/{api.uids['alice']}/credits"), 403)
    assert Decimal(str((await _credits(api, "bob"))["balance"])) == 10


async def test_a_run_is_frozen_then_charged_its_cost(api: Api, worker: None) -> None:
    await _price_the_model(api)
    await _set_balance(api, "alice", Decimal(10_000))
    done = await _run(api, "one two three")
    assert done["status"] == "completed" and done["output"] == "echo: one two three"
    cost = Decimal(str(done["usage"]["cost"]))
    assert cost == done["usage"]["input_tokens"] + done["usage"]["output_tokens"]
    after = await _credits(api)
    assert Decimal(after["balance"]) == 10_000 - cost and Decimal(after["frozen"]) == 0
    run_id = done["run"]["run_id"]
    mine = [(r["kind"], Decimal(str(r["delta"]))) for r in after["ledger"] if r["run_id"] == run_id]
    assert mine == [("charge", -cost), ("release", ESTIMATE), ("freeze", -ESTIMATE)]


async def test_a_run_the_balance_cannot_cover_fails_before_any_model_call(
    api: Api, worker: None
) -> None:
    await _price_the_model(api)
    await _set_balance(api, "alice", ESTIMATE - 1)
    refused = await _run(api, "hello")
    assert refused["status"] == "failed" and refused["error"]["type"] == "insufficient_credits"
    assert "insufficient credits" in refused["error"]["message"]
    assert refused["usage"] is None  # the model was never called
    assert Decimal(str((await _credits(api))["balance"])) == ESTIMATE - 1
    # the client sees it on the run's stream as its error and end
    events = await api.value(
        "SELECT array_agg(event ORDER BY seq) FROM yuxi.run_events WHERE run_id = %s",
        refused["run"]["run_id"],
    )
    assert events[-2:] == ["error", "end"]

    # a BYOK model of the same spec is the user's own: never frozen, never charged
    own = await api.alice.post(
        "/api/me/models", json={"spec": "builtin:scripted", "name": "My scripted"}
    )
    assert own.status_code == 201, own.text
    try:
        free = await _run(api, "hello")
        assert free["status"] == "completed" and free["usage"]["cost"] is None
        assert Decimal(str((await _credits(api))["balance"])) == ESTIMATE - 1
    finally:
        await api.alice.delete(f"/api/me/models/{own.json()['id']}")


async def test_a_further_model_call_the_balance_cannot_cover_is_refused(
    api: Api, worker: None
) -> None:
    await _price_the_model(api)
    # covers the first call's freeze, not the first call's cost plus a second freeze
    await _set_balance(api, "alice", ESTIMATE + 5)
    refused = await _run(api, '/tool calculator {"expression": "2+3"}')
    assert refused["status"] == "failed" and refused["error"]["type"] == "insufficient_credits"
    # the first call happened and is charged; the second never did
    first = Decimal(str(refused["usage"]["cost"]))
    assert refused["usage"]["output_tokens"] == 1 + 2  # the tool call alone
    assert Decimal(str((await _credits(api))["balance"])) == ESTIMATE + 5 - first
    assert Decimal((await _credits(api))["frozen"]) == 0
