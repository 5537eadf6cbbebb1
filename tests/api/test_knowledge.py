"""Knowledge bases over real HTTP with a real worker: documents in (txt, md, html, pdf,
docx; Chinese and English), ingested to ready, found by search (two-character Chinese
words included), embeddings through the local OpenAI stub, sharing (404 for others,
403 on writes to a knowledge base shared read-only), and what a run's agent may search
(unset / list / empty, a share revoked between two runs).

The originals live in the file store: the worker here has a ``YUXI_HOME`` of its own,
empty, so every ingestion reads them from PostgreSQL, never from the API's disk."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.api.conftest import Api, error_of
from tests.integration.worker_harness import running_worker
from tests.knowledge_files import docx_bytes, pdf_bytes
from tests.openai_stub import StubServer, stub_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

API_SETTINGS = {"kb_document_max_bytes": 256 * 1024}

DOCUMENTS: dict[str, tuple[bytes, str]] = {
    "notes.txt": (
        "向量数据库的索引结构决定了检索速度。\n\n我们的团队在上海办公，每周三开会讨论进度。".encode(),
        "text/plain",
    ),
    "guide.md": (
        b"# Deployment guide\n\nThe reverse proxy terminates TLS before traffic reaches the"
        b" application.\n\nBackups run nightly with pg_dump.",
        "text/markdown",
    ),
    "page.html": (
        "<html><head><style>.x{}</style></head><body><h1>园艺</h1><p>番茄需要充足的阳光"
        "和排水良好的土壤。</p><script>var hidden = 'zzqq';</script></body></html>".encode(),
        "text/html",
    ),
    "report.pdf": (
        pdf_bytes(
            ["季度报告：营收增长百分之十二。", "The quarterly revenue grew by twelve percent."]
        ),
        "application/pdf",
    ),
    "manual.docx": (
        docx_bytes(
            ["咖啡机的清洁步骤非常简单。", "Descale the espresso machine every month."],
            [["型号", "Barista Pro"]],
        ),
        "application/octet-stream",
    ),
}


@pytest.fixture(scope="module")
def worker_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The worker's ``YUXI_HOME``: another directory than the API's, empty."""
    return tmp_path_factory.mktemp("yuxi-worker-home")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def worker(api: Api, worker_home: Path) -> AsyncIterator[None]:
    """This module's worker, on a home of its own (as on another host)."""
    assert worker_home != api.home and files_under(worker_home) == {}
    async with running_worker(api.db_url, worker_home, worker_concurrency=8):
        yield


def files_under(home: Path) -> dict[str, bytes]:
    """Every file under ``home``: relative path -> bytes."""
    return {p.relative_to(home).as_posix(): p.read_bytes() for p in home.rglob("*") if p.is_file()}


async def kb_files(api: Api, kb_id: str) -> dict[str, tuple[int, str]]:
    """The files of the knowledge base's tree in the store: path -> (bytes, sha256)."""
    rows = await api.sql(
        "SELECT f.path, f.bytes, f.sha256 FROM yuxi.file_trees t,"
        " LATERAL yuxi.file_list(t.id) f WHERE t.kind = 'knowledge_base' AND t.root = %s",
        kb_id,
    )
    return {path: (size, sha) for path, size, sha in rows}


async def kb_tree_exists(api: Api, kb_id: str) -> bool:
    return bool(
        await api.value(
            "SELECT count(*) FROM yuxi.file_trees WHERE kind = 'knowledge_base' AND root = %s",
            kb_id,
        )
    )


async def unfinished_contents(api: Api, who: str = "alice") -> int:
    """Contents of the user's still being written (an upload never linked nor aborted)."""
    return int(
        await api.value(
            "SELECT count(*) FROM yuxi.file_contents WHERE owner_uid = %s AND sha256 IS NULL",
            api.uids[who],
        )
    )


@pytest.fixture(scope="module")
def provider() -> Iterator[StubServer]:
    with stub_server() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("YUXI_OPENAI_BASE_URL", server.base_url)
        patch.setenv("YUXI_OPENAI_API_KEY", "sk-stub-secret-key")
        patch.setenv("YUXI_OPENAI_MAX_RETRIES", "0")
        yield server


async def create_kb(api: Api, who: str = "alice", **body: Any) -> dict[str, Any]:
    body.setdefault("name", "Notes")
    response = await api.clients[who].post("/api/knowledge-bases", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def upload(
    api: Api, kb_id: str, files: dict[str, tuple[bytes, str]], who: str = "alice"
) -> list[dict[str, Any]]:
    response = await api.clients[who].post(
        f"/api/knowledge-bases/{kb_id}/documents",
        files=[("file", (name, data, kind)) for name, (data, kind) in files.items()],
    )
    assert response.status_code == 201, response.text
    return list(response.json())


async def wait_documents(
    api: Api, kb_id: str, statuses: set[str] | None = None, within: float = 30.0
) -> list[dict[str, Any]]:
    """The knowledge base's documents once none is queued or processing."""
    deadline = time.monotonic() + within
    while True:
        response = await api.alice.get(f"/api/knowledge-bases/{kb_id}/documents")
        assert response.status_code == 200, response.text
        documents = list(response.json())
        if all(d["status"] in (statuses or {"ready", "failed"}) for d in documents):
            return documents
        if time.monotonic() > deadline:
            raise AssertionError(f"documents still being ingested: {documents}")
        await asyncio.sleep(0.05)


async def search(api: Api, kb_id: str, query: str, who: str = "alice", k: int = 3) -> Any:
    response = await api.clients[who].post(
        f"/api/knowledge-bases/{kb_id}/search", json={"query": query, "k": k}
    )
    assert response.status_code == 200, response.text
    return response.json()["results"]


async def tool_run(api: Api, agent: str, arguments: dict[str, Any], who: str = "alice") -> str:
    thread = await api.thread(who, agent=agent)
    view = await api.submit(thread, f"/tool search_knowledge {json.dumps(arguments)}", who)
    run = await api.wait_run(view["run_id"], who=who)
    assert run["status"] == "completed", run
    return str((await api.result(view["run_id"], who))["output"])


async def seed_agent(api: Api, slug: str, knowledges: list[str] | None) -> None:
    context: dict[str, Any] = {"model": "builtin:scripted"}
    if knowledges is not None:
        context["knowledges"] = knowledges
    await api.sql(
        "SELECT yuxi.agent_seed(%s, %s, 'chatbot', %s::jsonb)",
        slug,
        slug,
        json.dumps({"context": context}),
    )


async def test_documents_of_every_kind_are_ingested_and_found(api: Api, worker: None) -> None:
    kb = await create_kb(api, name="混合 Mixed")
    assert kb["slug"] == "mixed" and kb["share_scope"] == "owner" and kb["embedding_model"] is None
    documents = await upload(api, kb["id"], DOCUMENTS)
    assert [d["status"] for d in documents] == ["queued"] * len(DOCUMENTS)
    assert {
        "id",
        "kb_id",
        "filename",
        "media_type",
        "bytes",
        "sha256",
        "status",
        "chunks",
        "error",
    } <= set(documents[0])
    ready = await wait_documents(api, kb["id"])
    assert {d["filename"]: d["status"] for d in ready} == dict.fromkeys(DOCUMENTS, "ready")
    assert all(d["chunks"] >= 1 and d["error"] is None for d in ready)

    expected = {
        "索引": "notes.txt",  # a two-character Chinese word inside a longer run
        "上海": "notes.txt",
        "reverse proxy TLS": "guide.md",
        "番茄": "page.html",
        "营收增长": "report.pdf",
        "quarterly revenue": "report.pdf",
        "咖啡机": "manual.docx",
        "espresso": "manual.docx",
        "Barista": "manual.docx",
    }
    for query, filename in expected.items():
        results = await search(api, kb["id"], query)
        assert results, query
        assert results[0]["filename"] == filename, (query, results)
        assert {"document_id", "filename", "chunk", "text", "score"} <= set(results[0])
    assert await search(api, kb["id"], "zzqq") == []  # script text is not indexed
    assert await search(api, kb["id"], "   ") == []

    listed = (await api.alice.get(f"/api/knowledge-bases/{kb['id']}")).json()
    assert (listed["documents"], listed["ready_documents"]) == (5, 5)
    assert listed["chunks"] == sum(d["chunks"] for d in ready)

    # each original is the file <document id> of the knowledge base's tree, byte for byte
    assert await kb_files(api, kb["id"]) == {
        d["id"]: (
            len(DOCUMENTS[d["filename"]][0]),
            hashlib.sha256(DOCUMENTS[d["filename"]][0]).hexdigest(),
        )
        for d in ready
    }


async def test_a_worker_with_another_empty_home_ingests_from_the_store(
    api: Api,
    worker: None,
    worker_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API (one YUXI_HOME) takes the upload, a worker with another, empty YUXI_HOME
    ingests it: it read the original from PostgreSQL. Neither home holds a knowledge/
    directory, nor any copy of the document, afterwards; the PDF's temporary copy (its
    reader wants a file) is gone once it was read."""
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))  # the in-process worker's too
    kb = await create_kb(api, name="Elsewhere")
    body = "灯塔守护者每晚点亮灯。The lighthouse keeper lights the lamp every night.".encode()
    pdf = pdf_bytes(["The harbour master logs every ship that docks."])
    [text, paper] = await upload(
        api,
        kb["id"],
        {"keeper.txt": (body, "text/plain"), "harbour.pdf": (pdf, "application/pdf")},
    )
    ready = await wait_documents(api, kb["id"])
    assert {d["status"] for d in ready} == {"ready"}, ready
    assert (await search(api, kb["id"], "灯塔"))[0]["document_id"] == text["id"]
    assert (await search(api, kb["id"], "harbour master"))[0]["document_id"] == paper["id"]

    for home in (api.home, worker_home):
        held = files_under(home)
        assert not any(path.startswith("knowledge/") for path in held), sorted(held)
        assert [path for path, data in held.items() if data in (body, pdf)] == []
    assert files_under(spool) == {} and list(spool.iterdir()) == []


async def test_the_same_bytes_make_one_document_even_uploaded_at_once(
    api: Api, worker: None
) -> None:
    kb = await create_kb(api, name="Twice")
    files = {"a.txt": (b"identical content about lighthouses", "text/plain")}
    first, second = await asyncio.gather(upload(api, kb["id"], files), upload(api, kb["id"], files))
    assert first[0]["id"] == second[0]["id"]
    assert sorted([first[0]["created"], second[0]["created"]]) == [False, True]
    again = await upload(api, kb["id"], {"renamed.txt": files["a.txt"]})
    assert again[0]["id"] == first[0]["id"] and again[0]["created"] is False
    assert len(await wait_documents(api, kb["id"])) == 1


async def test_unreadable_documents_fail_with_a_clear_error(api: Api, worker: None) -> None:
    kb = await create_kb(api, name="Broken")
    await upload(
        api,
        kb["id"],
        {
            "image.png": (b"\x89PNG\r\n\x1a\n" + b"0" * 20, "image/png"),
            "broken.pdf": (b"%PDF-1.4 not really", "application/pdf"),
            "empty.txt": (b"   \n  ", "text/plain"),
        },
    )
    documents = {d["filename"]: d for d in await wait_documents(api, kb["id"])}
    assert {d["status"] for d in documents.values()} == {"failed"}
    assert "unsupported document type image/png" in documents["image.png"]["error"]
    assert "cannot read it as pdf" in documents["broken.pdf"]["error"]
    assert "no text found" in documents["empty.txt"]["error"]
    assert all(d["chunks"] == 0 for d in documents.values())


async def test_a_document_too_large_is_a_413(api: Api) -> None:
    kb = await create_kb(api, name="Small")
    response = await api.alice.post(
        f"/api/knowledge-bases/{kb['id']}/documents",
        files={"file": ("big.txt", b"x" * (300 * 1024), "text/plain")},
    )
    error_of(response, 413, "payload_too_large")
    assert (await api.alice.get(f"/api/knowledge-bases/{kb['id']}/documents")).json() == []
    # nothing of it stays: no document, no file, no unfinished content of the upload
    assert await kb_files(api, kb["id"]) == {}
    assert await unfinished_contents(api) == 0
    assert not (api.home / "knowledge").exists()

    # a file within the limit but past the store's limit for the tree: refused as a
    # whole, the same request's smaller file included
    await api.sql("UPDATE yuxi.file_limits SET tree_max_bytes = 100 * 1024")
    try:
        response = await api.alice.post(
            f"/api/knowledge-bases/{kb['id']}/documents",
            files=[
                ("file", ("small.txt", b"a small note about tides", "text/plain")),
                ("file", ("mid.txt", b"y" * (200 * 1024), "text/plain")),
            ],
        )
    finally:
        await api.sql("UPDATE yuxi.file_limits SET tree_max_bytes = DEFAULT")
    error_of(response, 413, "payload_too_large")
    assert (await api.alice.get(f"/api/knowledge-bases/{kb['id']}/documents")).json() == []
    assert await kb_files(api, kb["id"]) == {}
    assert await unfinished_contents(api) == 0
    jobs = await api.value(
        "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'ingest_document'"
        " AND args->>'document_id' NOT IN (SELECT id::text FROM yuxi.kb_documents)"
    )
    assert jobs == 0


async def test_deleting_a_document_or_a_knowledge_base_removes_its_chunks(
    api: Api, worker: None
) -> None:
    kb = await create_kb(api, name="Doomed")
    [doc] = await upload(api, kb["id"], {"d.txt": (b"glaciers move slowly", "text/plain")})
    await wait_documents(api, kb["id"])
    assert await search(api, kb["id"], "glaciers")
    response = await api.alice.delete(f"/api/knowledge-bases/{kb['id']}/documents/{doc['id']}")
    assert response.status_code == 204, response.text
    assert await search(api, kb["id"], "glaciers") == []
    assert (
        await api.value("SELECT count(*) FROM yuxi.kb_chunks WHERE document_id = %s", doc["id"])
        == 0
    )
    assert await kb_files(api, kb["id"]) == {}  # its original is gone from the store
    error_of(await api.alice.get(f"/api/knowledge-bases/{kb['id']}/documents/{doc['id']}"), 404)

    [doc] = await upload(api, kb["id"], {"e.txt": (b"fjords are deep", "text/plain")})
    await wait_documents(api, kb["id"])
    assert list(await kb_files(api, kb["id"])) == [doc["id"]]
    assert (await api.alice.delete(f"/api/knowledge-bases/{kb['id']}")).status_code == 204
    error_of(await api.alice.get(f"/api/knowledge-bases/{kb['id']}"), 404)
    assert (
        await api.value("SELECT count(*) FROM yuxi.kb_chunks WHERE document_id = %s", doc["id"])
        == 0
    )
    assert not await kb_tree_exists(api, kb["id"])  # its tree went with it
    assert not (api.home / "knowledge").exists()


async def test_others_see_404_and_readers_of_a_share_get_403_on_writes(api: Api) -> None:
    kb = await create_kb(api, name="Private")
    path = f"/api/knowledge-bases/{kb['id']}"
    for response in (
        await api.bob.get(path),
        await api.bob.get(f"{path}/documents"),
        await api.bob.post(f"{path}/search", json={"query": "x"}),
        await api.bob.patch(path, json={"name": "mine"}),
        await api.bob.delete(path),
        await api.admin.get(path),  # admins have no special access to a user's data
    ):
        error_of(response, 404, "not_found")
    assert kb["id"] not in {k["id"] for k in (await api.bob.get("/api/knowledge-bases")).json()}

    response = await api.alice.patch(
        path, json={"share_scope": "selected", "shared_with": [str(api.uids["bob"])]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["shared_with"] == [str(api.uids["bob"])]
    assert (await api.bob.get(path)).status_code == 200
    assert kb["id"] in {k["id"] for k in (await api.bob.get("/api/knowledge-bases")).json()}
    assert (await api.bob.post(f"{path}/search", json={"query": "x"})).status_code == 200
    for response in (
        await api.bob.patch(path, json={"name": "mine"}),
        await api.bob.delete(path),
        await api.bob.post(f"{path}/documents", files={"file": ("x.txt", b"sneaky", "text/plain")}),
    ):
        error_of(response, 403, "forbidden")
    error_of(await api.anon.get(path), 401)

    error_of(await api.alice.patch(path, json={"embedding_model": "openai:other"}), 400)
    error_of(
        await api.alice.post("/api/knowledge-bases", json={"name": "x", "embedding_model": "bad"}),
        400,
    )
    error_of(await api.alice.post("/api/knowledge-bases", json={"name": ""}), 400)
    response = await api.alice.post("/api/knowledge-bases", json={"name": "P", "slug": kb["slug"]})
    error_of(response, 409, "knowledge_base_exists")


async def test_embeddings_through_the_openai_stub(
    api: Api, worker: None, provider: StubServer
) -> None:
    kb = await create_kb(api, name="Vectors", embedding_model="openai:stub-embed")
    assert kb["embedding_model"] == "openai:stub-embed"
    await upload(
        api,
        kb["id"],
        {
            "birds.txt": (b"Penguins are flightless birds living in Antarctica.", "text/plain"),
            "tea.txt": ("绿茶和红茶的区别在于发酵程度。".encode(), "text/plain"),
        },
    )
    documents = await wait_documents(api, kb["id"])
    assert {d["status"] for d in documents} == {"ready"}, documents
    embedded = await api.value(
        "SELECT count(*) FROM yuxi.kb_chunks WHERE kb_id = %s AND cardinality(embedding) = 64",
        kb["id"],
    )
    assert embedded == 2
    norm = await api.value(
        "SELECT sqrt(sum(x * x)) FROM yuxi.kb_chunks c, unnest(c.embedding) x WHERE kb_id = %s"
        " GROUP BY c.document_id LIMIT 1",
        kb["id"],
    )
    assert abs(norm - 1) < 1e-5
    requests = [r for r in provider.requests if r.path == "/v1/embeddings"]
    assert requests and requests[0].headers["authorization"] == "Bearer sk-stub-secret-key"

    results = await search(api, kb["id"], "flightless penguins")
    assert results[0]["filename"] == "birds.txt"
    hits = await api.sql(
        "SELECT filename, vector_rank FROM yuxi.kb_search(%s, %s::uuid[], 'penguins', 3,"
        " %s::jsonb)",
        api.uids["alice"],
        [kb["id"]],
        json.dumps({"openai:stub-embed": [1.0] + [0.0] * 63}),
    )
    assert hits and all(rank is not None for _name, rank in hits)

    # on a server with pgvector the 64-dimension HNSW index exists and is used
    vector = await api.value("SELECT vector_indexing FROM yuxi.kb_vector_status()")
    index = await api.value("SELECT to_regclass('yuxi.kb_chunks_hnsw_64')::text")
    assert (index is not None) == vector
    health = (await api.anon.get("/api/system/health")).json()
    assert health["vector_indexing"] is vector
    assert health["vector_search"].startswith("on" if vector else "off")


async def test_embedding_failures_never_show_the_key(
    api: Api, worker: None, provider: StubServer
) -> None:
    kb = await create_kb(api, name="Boom", embedding_model="openai:embed-boom")
    await upload(api, kb["id"], {"x.txt": (b"anything at all", "text/plain")})
    # a 5xx is transient: tried three times, then failed
    [document] = await wait_documents(api, kb["id"], within=60)
    assert document["status"] == "failed" and document["attempts"] == 3, document
    assert "embeddings exploded" in document["error"]
    assert "sk-stub-secret-key" not in json.dumps(document)


async def test_what_an_agent_may_search_narrows_the_users_access(api: Api, worker: None) -> None:
    ocean = await create_kb(api, name="Ocean")
    desert = await create_kb(api, name="Desert")
    secret = await create_kb(api, "bob", name="Bob secret")
    await upload(
        api, ocean["id"], {"o.txt": ("鲸鱼在深海中歌唱。Whales sing.".encode(), "text/plain")}
    )
    await upload(
        api, desert["id"], {"d.txt": ("骆驼能在沙漠中行走。Camels walk.".encode(), "text/plain")}
    )
    await upload(
        api, secret["id"], {"s.txt": (b"Whales and camels, bob's secret.", "text/plain")}, "bob"
    )
    for kb in (ocean, desert):
        await wait_documents(api, kb["id"])
    await seed_agent(api, "kb_all", None)
    await seed_agent(api, "kb_desert", [desert["id"], secret["id"]])
    await seed_agent(api, "kb_none", [])
    for slug in ("kb_all", "kb_desert", "kb_none"):
        await api.sql("UPDATE yuxi.agents SET share_scope = 'all' WHERE slug = %s", slug)

    unset = await tool_run(api, "kb_all", {"query": "鲸鱼 骆驼"})
    assert "[[ref:1]]" in unset and "o.txt" in unset and "d.txt" in unset, unset
    assert "secret" not in unset  # bob's knowledge base is not alice's to read

    listed = await tool_run(api, "kb_desert", {"query": "鲸鱼 骆驼"})
    assert "d.txt" in listed and "o.txt" not in listed and "secret" not in listed, listed
    refused = await tool_run(api, "kb_desert", {"query": "鲸鱼", "knowledge_base": "Ocean"})
    assert "knowledge base Ocean is not available" in refused, refused
    named = await tool_run(api, "kb_all", {"query": "whales", "knowledge_base": "ocean", "k": 1})
    assert "o.txt" in named and "[[ref:2]]" not in named, named

    none = await tool_run(api, "kb_none", {"query": "鲸鱼"})
    assert "tool search_knowledge is not available" in none, none

    thread = await api.thread("alice", agent="kb_desert")
    view = await api.submit(thread, "hello")
    await api.completed(view["run_id"])
    manifest = (await api.alice.get(f"/api/agent/runs/{view['run_id']}/manifest")).json()
    assert manifest["resources"]["knowledges"] == [desert["id"]], manifest
    assert manifest["knowledge_bases"] == [{"id": desert["id"], "name": "Desert"}]


async def test_a_share_revoked_between_two_runs_refuses_the_second(api: Api, worker: None) -> None:
    kb = await create_kb(api, name="Shared recipes", share_scope="all")
    await upload(api, kb["id"], {"r.txt": ("饺子要用冷水和面。".encode(), "text/plain")})
    await wait_documents(api, kb["id"])
    await seed_agent(api, "kb_reader", [kb["id"]])
    await api.sql("UPDATE yuxi.agents SET share_scope = 'all' WHERE slug = 'kb_reader'")

    first = await tool_run(api, "kb_reader", {"query": "饺子"}, who="bob")
    assert "r.txt" in first and "冷水" in first, first
    response = await api.alice.patch(
        f"/api/knowledge-bases/{kb['id']}", json={"share_scope": "owner"}
    )
    assert response.status_code == 200, response.text
    second = await tool_run(api, "kb_reader", {"query": "饺子"}, who="bob")
    assert "not available" in second and "冷水" not in second, second
