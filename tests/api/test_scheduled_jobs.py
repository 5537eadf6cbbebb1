"""/api/scheduled-jobs over real HTTP: the owner's jobs only, clear 400s, run now."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, error_of

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("worker")]


async def _project(api: Api, who: str = "alice") -> str:
    response = await api.clients[who].post("/api/projects", json={"name": "reports"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _job(project: str, **overrides: Any) -> dict[str, Any]:
    body = {
        "project_id": project,
        "agent_slug": "chatbot",
        "prompt": "daily report",
        "cron": "0 9 * * *",
        "timezone": "Europe/Paris",
    }
    body.update(overrides)
    return body


async def test_create_read_update_run_and_delete(api: Api) -> None:
    project = await _project(api)
    created = await api.alice.post("/api/scheduled-jobs", json=_job(project))
    assert created.status_code == 201, created.text
    job = created.json()
    assert (job["cron"], job["timezone"], job["enabled"]) == ("0 9 * * *", "Europe/Paris", True)
    assert job["next_fire_at"].endswith(("T07:00:00Z", "T08:00:00Z"))  # 09:00 in Paris
    job_id = job["id"]
    assert [j["id"] for j in (await api.alice.get("/api/scheduled-jobs")).json()] == [job_id]

    patched = await api.alice.patch(f"/api/scheduled-jobs/{job_id}", json={"enabled": False})
    assert patched.status_code == 200 and patched.json()["enabled"] is False
    assert patched.json()["prompt"] == "daily report"  # untouched fields stay

    fired = await api.alice.post(f"/api/scheduled-jobs/{job_id}/run")
    assert fired.status_code == 202, fired.text
    occurrence = fired.json()
    assert (occurrence["trigger"], occurrence["status"]) == ("manual", "submitted")
    await api.completed(occurrence["run_id"])
    history = (await api.alice.get(f"/api/scheduled-jobs/{job_id}/occurrences")).json()
    assert [(o["id"], o["run_status"]) for o in history] == [(occurrence["id"], "completed")]

    assert (await api.alice.delete(f"/api/scheduled-jobs/{job_id}")).status_code == 204
    error_of(await api.alice.get(f"/api/scheduled-jobs/{job_id}"), 404, "not_found")


async def test_another_users_job_is_not_found_for_every_method(api: Api) -> None:
    job_id = (await api.alice.post("/api/scheduled-jobs", json=_job(await _project(api)))).json()[
        "id"
    ]
    path = f"/api/scheduled-jobs/{job_id}"
    for method, url, body in (
        ("GET", path, None),
        ("PATCH", path, {"enabled": False}),
        ("DELETE", path, None),
        ("POST", f"{path}/run", None),
        ("GET", f"{path}/occurrences", None),
    ):
        error_of(await api.bob.request(method, url, json=body), 404, "not_found")
    assert job_id not in [j["id"] for j in (await api.bob.get("/api/scheduled-jobs")).json()]
    job = (await api.alice.get(path)).json()
    assert job["enabled"] is True  # bob's PATCH changed nothing
    # nor may bob schedule into alice's project, or with an agent he cannot see
    project = job["project_id"]
    error_of(await api.bob.post("/api/scheduled-jobs", json=_job(project)), 404, "not_found")
    bobs = await _project(api, "bob")
    error_of(
        await api.bob.post("/api/scheduled-jobs", json=_job(bobs, agent_slug="private")),
        404,
        "not_found",
    )


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"cron": "0 9 * *"}, "invalid_schedule"),
        ({"cron": "0 0 9 * * *"}, "invalid_schedule"),
        ({"cron": "61 * * * *"}, "invalid_schedule"),
        ({"timezone": "Mars/Olympus"}, "invalid_schedule"),
        ({"prompt": "   "}, "invalid_input"),
        ({"tool_approval_mode": "sometimes"}, "invalid_request"),
        ({"project_id": "not-a-uuid"}, "invalid_request"),
    ],
)
async def test_bad_schedules_are_400(api: Api, overrides: dict[str, Any], code: str) -> None:
    project = await _project(api)
    error_of(
        await api.alice.post("/api/scheduled-jobs", json=_job(project, **overrides)), 400, code
    )
    job_id = (await api.alice.post("/api/scheduled-jobs", json=_job(project))).json()["id"]
    if "cron" in overrides or "timezone" in overrides or "prompt" in overrides:
        error_of(await api.alice.patch(f"/api/scheduled-jobs/{job_id}", json=overrides), 400, code)
