"""The console's knowledge-bases, models and usage panels, and its stream reconnecting
after the server closes it mid-run, in Chromium against a real server and worker."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api
from tests.browser.conftest import Shots
from tests.browser.test_console import (
    PHONE,
    _expect_timeout,
    assistant,
    goto_thread,
    open_tab,
    send,
)
from tests.cutting_proxy import CuttingProxy

__all__ = ["_expect_timeout", "open_tab"]

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEA = "# Tea\n\nLongjing green tea grows near Hangzhou.\n\n龙井茶产于杭州西湖。\n"


# -- knowledge bases -----------------------------------------------------------------


async def test_a_knowledge_base_is_created_filled_watched_searched_and_deleted(
    open_tab: Any, stack: Api, shots: Shots
) -> None:
    from playwright.async_api import expect

    tab = await open_tab()
    page = tab.page
    await page.goto(f"{stack.base_url}/")
    await page.get_by_role("tab", name="Knowledge").click()
    panel = page.locator(".panel-body")
    await expect(panel.locator(".kb-list")).to_contain_text("No knowledge bases yet.")
    await panel.get_by_label("Name").fill("Tea handbook")
    await panel.get_by_label("Description").fill("What we know about tea")
    await panel.get_by_label("Shared with").select_option("all")
    await panel.get_by_role("button", name="Create knowledge base").click()
    kb = panel.locator(".kb-list li", has_text="Tea handbook")
    await expect(kb).to_contain_text("everyone")
    await expect(kb).to_contain_text("documents ready: 0/0")
    detail = panel.locator(".kb-detail")
    await expect(detail.get_by_role("heading", name="Tea handbook")).to_be_visible()

    # every status the page shows a document in, in order
    await page.evaluate(
        """() => {
          window.__statuses = {};
          new MutationObserver(() => {
            for (const li of document.querySelectorAll(".kb-doc")) {
              const name = li.querySelector(".kb-doc-name").textContent;
              const seen = (window.__statuses[name] ||= []);
              if (seen[seen.length - 1] !== li.dataset.status) seen.push(li.dataset.status);
            }
          }).observe(document.body, { childList: true, subtree: true });
        }"""
    )
    await detail.get_by_label("Upload documents").set_input_files(
        files=[
            {
                "name": "tea.md",
                "mimeType": "text/markdown",
                "buffer": TEA.encode(),
            },
            {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4 not really"},
        ]
    )
    # the page follows the ingestion by itself: no reload
    tea = detail.locator(".kb-doc", has_text="tea.md")
    broken = detail.locator(".kb-doc", has_text="broken.pdf")
    await expect(tea.locator(".kb-status")).to_have_text("ready")
    await expect(tea).to_contain_text("chunks")
    await expect(broken.locator(".kb-status")).to_have_text("failed")
    await expect(broken.locator(".kb-doc-error")).to_contain_text("cannot read it as pdf")
    await expect(kb).to_contain_text("documents ready: 1/2")
    statuses = await page.evaluate("window.__statuses")
    # queued as the upload answers; processing only if a poll happened to catch it
    assert statuses["tea.md"][0] == "queued" and statuses["tea.md"][-1] == "ready", statuses
    assert set(statuses["tea.md"]) <= {"queued", "processing", "ready"}, statuses
    assert statuses["broken.pdf"][0] == "queued" and statuses["broken.pdf"][-1] == "failed"

    await detail.get_by_label("Query").fill("Hangzhou")
    await detail.get_by_label("Query").press("Enter")
    hit = detail.locator(".kb-hit").first
    await expect(hit).to_contain_text("tea.md")
    await expect(hit.locator(".kb-hit-meta")).to_contain_text(re.compile(r"chunk \d+"))
    await expect(hit.locator(".kb-hit-meta")).to_contain_text(re.compile(r"score \d+\.\d{4}"))
    await expect(hit.locator(".kb-hit-text")).to_contain_text("Longjing")
    await shots.take(page, "knowledge", docs=True)

    # shared with everyone: bob may search it, not change it
    other = await open_tab("bob")
    await other.page.goto(f"{stack.base_url}/")
    await other.page.get_by_role("tab", name="Knowledge").click()
    bobs = other.page.locator(".panel-body")
    await bobs.locator(".kb-list li", has_text="Tea handbook").get_by_role("button").click()
    await expect(bobs.locator(".kb-list li", has_text="Tea handbook")).to_contain_text("from alice")
    await expect(bobs.locator(".kb-detail")).to_contain_text("you may search it, not change it")
    assert await bobs.get_by_label("Upload documents").count() == 0
    assert await bobs.get_by_role("button", name="Delete knowledge base").count() == 0
    await bobs.get_by_label("Query").fill("杭州")
    await bobs.get_by_role("button", name="Search", exact=True).click()
    await expect(bobs.locator(".kb-hit").first).to_contain_text("龙井茶")

    # delete asks twice: a document, then the knowledge base
    remove = broken.get_by_role("button", name="Remove")
    await remove.click()
    await broken.get_by_role("button", name="Really remove?").click()
    await expect(broken).to_have_count(0)
    await expect(kb).to_contain_text("documents ready: 1/1")
    await detail.get_by_role("button", name="Delete knowledge base").click()
    await detail.get_by_role("button", name="Really delete it and its documents?").click()
    await expect(panel.locator(".kb-list")).to_contain_text("No knowledge bases yet.")
    assert (await stack.alice.get("/api/knowledge-bases")).json() == []


async def test_the_panels_on_a_phone_in_chinese(open_tab: Any, stack: Api, shots: Shots) -> None:
    from playwright.async_api import expect

    tab = await open_tab(viewport=PHONE, lang="zh")
    page = tab.page
    await page.goto(f"{stack.base_url}/")
    await page.get_by_role("button", name="面板").click()
    await page.get_by_role("tab", name="知识库").click()
    panel = page.locator(".panel-body")
    await panel.get_by_label("名称").fill("茶")
    await panel.get_by_role("button", name="创建知识库").click()
    await expect(panel.locator(".kb-list li", has_text="茶")).to_contain_text("仅自己")
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], "nothing overflows sideways"
    # the models and usage panels fit too: their forms and tables stay in the drawer
    await page.get_by_role("tab", name="模型").click()
    await expect(panel.get_by_role("heading", name="可选用的模型")).to_be_visible()
    await page.get_by_role("tab", name="用量").click()
    await expect(panel.get_by_label("时间范围")).to_be_visible()
    drawer = await page.locator("#panels").evaluate("(el) => [el.scrollWidth, el.clientWidth]")
    assert drawer[0] <= drawer[1], drawer
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    await shots.take(page, "usage-phone-zh")


# -- models --------------------------------------------------------------------------


async def test_models_platform_and_own_keys_never_shown(
    open_tab: Any, stack: Api, shots: Shots
) -> None:
    from playwright.async_api import expect

    platform_key = "sk-platform-secret-key-1234"
    own_key = "sk-alice-private-key-5678"

    admin = await open_tab("admin")
    page = admin.page
    await page.goto(f"{stack.base_url}/")
    await page.get_by_role("tab", name="Models").click()
    panel = page.locator(".panel-body")
    form = panel.locator(".model-form", has_text="Add a platform model")
    await form.get_by_label("Spec").fill("openai:team-gpt")
    await form.get_by_label("Display name").fill("Team GPT")
    await form.get_by_label("Base URL").fill("http://127.0.0.1:9/v1")
    await form.get_by_label("API key").fill(platform_key)
    await form.get_by_label("Context window (tokens)").fill("32000")
    await form.get_by_role("button", name="Add model").click()
    await expect(form.get_by_role("status")).to_have_text("Added.")
    await expect(form.get_by_label("API key")).to_have_value("")
    row = panel.locator(".model-list.platform li", has_text="Team GPT")
    await expect(row).to_contain_text("key …1234")
    await expect(row).to_contain_text("32,000 tokens")
    await expect(row).to_contain_text("streaming, tool calls")
    await expect(panel.locator(".model-list.pickable")).to_contain_text("Team GPT")

    # the agent form's model picker offers it
    await page.get_by_role("tab", name="Agent").click()
    picker = page.locator(
        '.config-form[data-agent=chatbot] datalist option[value="openai:team-gpt"]'
    )
    await expect(picker).to_have_attribute("label", "Team GPT")

    # alice may pick it; her own model with her own key is hers alone
    tab = await open_tab("alice")
    mine = tab.page
    await mine.goto(f"{stack.base_url}/")
    await mine.get_by_role("tab", name="Models").click()
    alices = mine.locator(".panel-body")
    await expect(alices.locator(".model-list.pickable")).to_contain_text("Team GPT")
    assert await alices.get_by_text("Add a platform model").count() == 0, "admins only"
    own = alices.locator(".model-form", has_text="your own key")
    await own.get_by_label("Spec").fill("openai:my-llama")
    await own.get_by_label("Display name").fill("My llama")
    await own.get_by_label("Base URL").fill("http://10.0.0.5:8001/v1")
    await own.get_by_label("API key").fill(own_key)
    await own.get_by_label("vision").check()
    await own.get_by_role("button", name="Add model").click()
    mine_row = alices.locator(".model-list.mine li", has_text="My llama")
    await expect(mine_row).to_contain_text("key …5678")
    await expect(mine_row).to_contain_text("vision")
    await expect(mine_row).to_contain_text("yours")
    await alices.evaluate("(el) => { el.scrollTop = 0; }")
    await shots.take(mine, "models", docs=True)
    for html in (await mine.content(), await page.content()):
        assert own_key not in html and platform_key not in html
    listed = (await stack.alice.get("/api/me/models")).json()
    assert [(m["spec"], m["has_key"], m["api_key_hint"]) for m in listed] == [
        ("openai:my-llama", True, "5678")
    ]
    assert listed[0]["capabilities"]["vision"] is True
    await mine.get_by_role("tab", name="Agent").click()
    await expect(
        mine.locator('.config-form[data-agent=chatbot] datalist option[value="openai:my-llama"]')
    ).to_have_attribute("label", "My llama (yours)")
    assert (await stack.bob.get("/api/me/models")).json() == []

    # a key is replaced or removed, never shown
    rotated = "sk-alice-rotated-key-9999"
    await mine.get_by_role("tab", name="Models").click()
    await mine_row.get_by_label("New API key").fill(rotated)
    await mine_row.get_by_role("button", name="Replace key").click()
    await expect(mine_row).to_contain_text("key …9999")
    assert rotated not in await mine.content()
    await mine_row.get_by_role("button", name="Remove key").click()
    await mine_row.get_by_role("button", name="Really remove the key?").click()
    await expect(mine_row).to_contain_text("no key")
    [after] = (await stack.alice.get("/api/me/models")).json()
    assert (after["has_key"], after["api_key_hint"]) == (False, None)

    # an admin disables the platform model: alice can no longer pick it
    await page.get_by_role("tab", name="Models").click()
    await row.get_by_label("Enabled").uncheck()
    await expect(row).to_contain_text("disabled")
    await mine.get_by_role("tab", name="Models").click()
    await expect(alices.locator(".model-list.pickable")).not_to_contain_text("Team GPT")
    await expect(alices.locator(".model-list.pickable")).to_contain_text("My llama")

    # removal asks twice
    await mine_row.get_by_role("button", name="Remove", exact=True).click()
    await mine_row.get_by_role("button", name="Really remove?").click()
    await expect(alices.locator(".model-list.mine")).to_contain_text("no models")
    await row.get_by_role("button", name="Remove", exact=True).click()
    await row.get_by_role("button", name="Really remove?").click()
    await expect(panel.locator(".model-list.platform")).to_contain_text("No platform models.")


async def test_a_bad_model_shows_the_apis_error(open_tab: Any, stack: Api) -> None:
    from playwright.async_api import expect

    tab = await open_tab("bob")
    await tab.page.goto(f"{stack.base_url}/")
    await tab.page.get_by_role("tab", name="Models").click()
    own = tab.page.locator(".panel-body .model-form", has_text="your own key")
    await own.get_by_label("Spec").fill("nonsense")
    await own.get_by_label("Display name").fill("Broken")
    await own.get_by_role("button", name="Add model").click()
    await expect(own.get_by_role("status")).to_contain_text("invalid_model")
    # the browser logs the 400 it was answered; that one was asked for
    assert any("status of 400" in p for p in tab.problems), tab.problems
    tab.problems[:] = [p for p in tab.problems if "status of 400" not in p]


# -- usage ---------------------------------------------------------------------------


async def test_usage_per_run_per_thread_per_day(open_tab: Any, stack: Api, shots: Shots) -> None:
    from playwright.async_api import expect

    thread_id = await stack.thread(title="usage")
    tab = await open_tab()
    page = tab.page
    await goto_thread(tab, stack, thread_id)
    await send(page, "one two three")
    await expect(assistant(page, "echo: one two three")).to_be_visible()
    await send(page, "four five")
    await expect(assistant(page, "echo: four five")).to_be_visible()
    expected = (await stack.alice.get(f"/api/agent/threads/{thread_id}/usage")).json()
    assert expected["output_tokens"] == 4 + 3, expected

    # the run: its own usage; the thread: both runs, per model
    await page.locator(".run-footer button", has_text="details").last.click()
    await expect(page.locator(".run-usage")).to_have_text(re.compile(r"^\d+ in · 3 out · —$"))
    total = page.locator(".thread-usage")
    await expect(total.locator(".thread-usage-total")).to_have_text(
        f"{expected['input_tokens']} in · 7 out · —"
    )
    await expect(total.locator("tr[data-model='builtin:scripted']")).to_contain_text("7")

    # per day: today's row for the scripted model, both runs at least
    await page.get_by_role("tab", name="Usage").click()
    today = page.locator(".usage-table tbody tr[data-model='builtin:scripted']")
    await expect(today).to_have_count(1)
    report = (await stack.alice.get("/api/usage")).json()["usage"]
    [row] = [r for r in report if r["model"] == "builtin:scripted"]
    await expect(today.locator("td").nth(2)).to_have_text(str(row["runs"]))
    await expect(today.locator("td").nth(4)).to_have_text(f"{row['output_tokens']:,}")
    await shots.take(page, "usage", docs=True)
    assert await page.get_by_label("All users").count() == 0, "admins only"

    # an admin sees everyone's, by name
    admin = await open_tab("admin")
    await admin.page.goto(f"{stack.base_url}/")
    await admin.page.get_by_role("tab", name="Usage").click()
    await admin.page.get_by_label("All users").check()
    await expect(
        admin.page.locator(".usage-table tbody tr", has_text="alice").first
    ).to_contain_text("builtin:scripted")


# -- the stream reconnecting -----------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="module")
async def proxy(stack: Api) -> AsyncIterator[CuttingProxy]:
    async with CuttingProxy(stack.base_url) as running:
        yield running


async def test_a_stream_cut_mid_run_resumes_from_its_last_seq(
    open_tab: Any, stack: Api, proxy: CuttingProxy
) -> None:
    from playwright.async_api import expect

    thread_id = await stack.thread(title="reconnect")
    tab = await open_tab()
    page = tab.page
    await page.goto(f"{proxy.base_url}/#/thread/{thread_id}")
    await expect(page.locator(".composer")).to_be_visible()
    proxy.armed = True
    await send(page, "/sleep 4")
    # the server closed the stream while the run sleeps: the page says so, and comes back
    await expect(page.locator(".live-status")).to_contain_text("reconnecting")
    history = (await stack.alice.get(f"/api/chat/thread/{thread_id}/history")).json()
    [run] = history["runs"]
    assert run["status"] == "running", "the stream was cut mid-run"
    await expect(assistant(page, "slept 4")).to_have_count(1)
    await expect(page.locator(".run-footer .run-status").last).to_have_text("completed")

    first, second, *others = [s for s in proxy.streams if run["run_id"] in s.path]
    assert others == [], "one reconnect"
    assert first.cut and "after_seq" not in first.path
    delivered = first.seqs()
    assert delivered, "events came before the cut"
    # the page resumes after the last event it read: the proxy's last one, or the one
    # before when Chromium drops the final chunk of a broken response with its error
    found = re.search(r"/events\?after_seq=(\d+)$", second.path)
    assert found, second.path
    resumed = int(found.group(1))
    assert resumed in delivered[-2:], (resumed, delivered)
    read = delivered[: delivered.index(resumed) + 1]
    # every event of the run exactly once, in order, over the two connections
    everything = await stack.alice.get(f"/api/agent/runs/{run['run_id']}/events")
    stored = [int(n) for n in re.findall(r"(?m)^id: (\d+)\r?$", everything.text)]
    assert read + second.seqs() == stored, (read, second.seqs(), stored)
    # and the page shows the reply once: neither lost nor doubled
    texts = await page.locator(".messages .msg.assistant .text").all_inner_texts()
    assert texts == ["slept 4"], texts
    # the browser logs the broken response; that one was asked for
    broken = [p for p in tab.problems if "ERR_INCOMPLETE_CHUNKED_ENCODING" in p]
    assert len(broken) == 1, tab.problems
    tab.problems.remove(broken[0])
