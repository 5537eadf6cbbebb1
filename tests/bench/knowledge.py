"""Knowledge-base search and ingestion: yuxi.kb_search against the bare queries it is made of.

Build: one user, one knowledge base with an embedding model, --documents documents
holding --chunks chunks in all (synthetic: about 20 English words from a vocabulary of
--vocabulary words and a run of 40 Chinese characters each; a random unit embedding of
--dims). The chunks are written as the worker writes them: per document
``yuxi.kb_document_claim``, then ``yuxi.kb_chunks_add`` in batches of 500, then
``yuxi.kb_document_ready``, one transaction per document, after
``yuxi.kb_vector_index_ensure`` (so with pgvector every chunk goes into the HNSW index
as it is written). Ingestion throughput is chunks written per second of that.
A second, end-to-end figure: ``ingest_document`` (extract, split, store) on
--e2e-documents text files of about 20 chunks each, without embeddings.

Measurement (--queries queries of two English words and one two-character Chinese word,
each variant timed --iterations times, in alternating blocks, after a warm-up):

- ``yuxi text``: ``yuxi.kb_search(uid, kb, query, 10)``, full text only;
- ``bare ts_rank``: ``SELECT … WHERE kb_id = ANY(…) AND search @@ q ORDER BY ts_rank
  LIMIT 10``, the same tsquery (yuxi.kb_query), no access check, no fusion;
- ``yuxi hybrid``: ``yuxi.kb_search`` with the query's embedding too;
- ``bare vector``: ``ORDER BY embedding::vector(n) <=> q LIMIT 10`` through the HNSW
  index (pgvector), or the exact dot product over real[] (no pgvector; fewer iterations,
  --exact-iterations, since each scans every chunk).

Targets: yuxi text ≤ 1.5× bare ts_rank; yuxi hybrid ≤ 1.5× (bare ts_rank + bare vector),
the two bare queries it is made of.

    uv run python -m tests.bench.knowledge                 # embedded PostgreSQL 18 + pgvector
    YUXI_BENCH_DATABASE_URL=postgresql://… uv run python -m tests.bench.knowledge
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from tests.bench.harness import (
    BenchDatabase,
    connect,
    log,
    percentile,
    print_table,
    run_benchmark,
    verdict,
)
from yuxi.queue.knowledge import (
    kb_chunks_add,
    kb_create,
    kb_document_add,
    kb_document_claim,
    kb_document_ready,
    kb_vector_index_ensure,
)

TARGET = 1.5
MODEL = "openai:bench-embedding"
# common Chinese characters to draw runs from
HANZI = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下"
    "过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都"
    "两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重"
    "新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想"
    "已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知"
    "较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造"
    "百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白"
    "教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集"
    "温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿"
    "千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存"
    "候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该"
    "铁价严"
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--documents", type=int, default=200)
    p.add_argument("--dims", type=int, default=128)
    p.add_argument("--vocabulary", type=int, default=2000)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--exact-iterations", type=int, default=10)
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--e2e-documents", type=int, default=20)
    p.add_argument("--seed", type=int, default=12)
    return p


def _words(count: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    found: set[str] = set()
    while len(found) < count:
        found.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(found)


def _vector(dims: int, rng: random.Random) -> list[float]:
    values = [rng.gauss(0, 1) for _ in range(dims)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def _chunk_text(words: list[str], rng: random.Random) -> str:
    english = " ".join(rng.choice(words) for _ in range(20))
    chinese = "".join(rng.choice(HANZI) for _ in range(40))
    return f"{english}。{chinese}。"


async def _build(
    url: str, args: argparse.Namespace, rng: random.Random, words: list[str]
) -> tuple[UUID, UUID, float]:
    async with await connect(url) as conn:
        cur = await conn.execute("INSERT INTO yuxi.users (name) VALUES ('bench') RETURNING id")
        uid = UUID(str((await cur.fetchone())[0]))  # type: ignore[index]
        kb = await kb_create(conn, uid, name="Bench", embedding_model=MODEL)
        index = await kb_vector_index_ensure(conn, args.dims)
        log(f"vector index: {index or 'none (no pgvector): exact scan'}")
        per_doc = max(1, args.chunks // args.documents)
        written = 0
        started = time.perf_counter()
        for n in range(args.documents):
            count = per_doc if n < args.documents - 1 else args.chunks - written
            doc = await kb_document_add(
                conn,
                uid,
                kb.id,
                filename=f"doc{n}.txt",
                size=1,
                sha256=f"{n:064x}",
                media_type="text/plain",
            )
            task = await kb_document_claim(conn, doc.id)
            assert task is not None
            async with conn.transaction():
                for start in range(0, count, 500):
                    size = min(500, count - start)
                    texts = [_chunk_text(words, rng) for _ in range(size)]
                    flat = [x for _ in range(size) for x in _vector(args.dims, rng)]
                    await kb_chunks_add(
                        conn, doc.id, task.attempt, start, texts, [60] * size, flat, args.dims
                    )
                await kb_document_ready(conn, doc.id, task.attempt)
            written += count
            if (n + 1) % max(1, args.documents // 10) == 0:
                log(f"{written} chunks written")
        seconds = time.perf_counter() - started
        await conn.execute("VACUUM ANALYZE yuxi.kb_chunks")
        await conn.execute("VACUUM ANALYZE yuxi.kb_documents")
    return uid, kb.id, written / seconds


async def _end_to_end(url: str, args: argparse.Namespace, uid: UUID, words: list[str]) -> float:
    """Chunks per second through ingest_document (extract, split, store; no embeddings)."""
    from yuxi.files.attachments import ReceivedFile
    from yuxi.files.store import PostgresFileStore
    from yuxi.knowledge.documents import commit_documents
    from yuxi.knowledge.ingest import ingest_document

    rng = random.Random(args.seed + 1)
    pool = AsyncConnectionPool(url, min_size=1, max_size=4, open=False, kwargs={"autocommit": True})
    await pool.open()
    try:
        files = PostgresFileStore(pool)
        async with pool.connection() as conn:
            kb = await kb_create(conn, uid, name="E2E")
        docs = []
        for n in range(args.e2e_documents):
            text = "\n\n".join(_chunk_text(words, rng) * 5 for _ in range(20))
            staged = ReceivedFile.open(files, uid, f"e{n}.txt", None, limit=10**9)
            await staged.write(text.encode())
            docs.extend(await commit_documents(pool, uid, kb.id, [staged]))
        started = time.perf_counter()
        chunks = 0
        for doc in docs:
            done = await ingest_document(pool, files, doc.id)
            assert done is not None and done.status == "ready", done
            chunks += done.chunks
        return chunks / (time.perf_counter() - started)
    finally:
        await pool.close()


async def _timed(conn: AsyncConnection[Any], query: str, params: tuple[Any, ...]) -> float:
    started = time.perf_counter()
    cur = await conn.execute(query, params)
    await cur.fetchall()
    return (time.perf_counter() - started) * 1000


async def measure(database: BenchDatabase, args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    words = _words(args.vocabulary, rng)
    log(f"writing {args.chunks} chunks ({args.dims} dimensions) in {args.documents} documents")
    uid, kb, chunks_per_second = await _build(database.url, args, rng, words)
    log("end-to-end ingestion")
    e2e = await _end_to_end(database.url, args, uid, words)

    async with await connect(database.url) as conn:
        cur = await conn.execute("SELECT vector_indexing FROM yuxi.kb_vector_status()")
        pgvector = bool((await cur.fetchone())[0])  # type: ignore[index]
        schema = ""
        if pgvector:
            cur = await conn.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n"
                " ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
            )
            schema = str((await cur.fetchone())[0])  # type: ignore[index]
            await conn.execute("SET hnsw.iterative_scan = relaxed_order")
            await conn.execute("SET hnsw.ef_search = 40")

        queries = []
        for _ in range(args.queries):
            hanzi = "".join(rng.choice(HANZI) for _ in range(2))
            text = f"{rng.choice(words)} {rng.choice(words)} {hanzi}"
            queries.append((text, _vector(args.dims, rng)))
        dims = args.dims
        if pgvector:
            bare_vector = (
                f"SELECT document_id, seq FROM yuxi.kb_chunks WHERE kb_id = ANY(%s)"
                f" AND cardinality(embedding) = {dims}"
                f" ORDER BY (embedding::{schema}.vector({dims})) OPERATOR({schema}.<=>)"
                f" %s::real[]::{schema}.vector({dims}) LIMIT 10"
            )
        else:
            bare_vector = (
                "SELECT document_id, seq FROM yuxi.kb_chunks WHERE kb_id = ANY(%s)"
                f" AND cardinality(embedding) = {dims}"
                " ORDER BY (SELECT sum(a * b) FROM unnest(embedding, %s::real[]) t(a, b)) DESC"
                " LIMIT 10"
            )
        variants: dict[str, tuple[str, Any]] = {
            "yuxi text": (
                "SELECT * FROM yuxi.kb_search(%s, %s::uuid[], %s, 10)",
                lambda q, v: (uid, [kb], q),
            ),
            "bare ts_rank": (
                "SELECT document_id, seq, ts_rank(search, q) FROM yuxi.kb_chunks,"
                " yuxi.kb_query(%s) q WHERE kb_id = ANY(%s) AND search @@ q"
                " ORDER BY ts_rank(search, q) DESC LIMIT 10",
                lambda q, v: (q, [kb]),
            ),
            "yuxi hybrid": (
                "SELECT * FROM yuxi.kb_search(%s, %s::uuid[], %s, 10, %s::jsonb)",
                lambda q, v: (uid, [kb], q, json.dumps({MODEL: v})),
            ),
            "bare vector": (bare_vector, lambda q, v: ([kb], v)),
        }
        vector_variants = {"yuxi hybrid", "bare vector"}
        times: dict[str, list[float]] = {name: [] for name in variants}
        # warm-up
        for query, params in variants.values():
            for text, vector in queries[:3]:
                await _timed(conn, query, params(text, vector))
        iterations = args.iterations
        exact = args.exact_iterations if not pgvector else iterations
        done = 0
        while done < iterations:
            order = list(variants) if (done // args.block) % 2 == 0 else list(reversed(variants))
            for name in order:
                if name in vector_variants and len(times[name]) >= exact:
                    continue
                query, params = variants[name]
                for i in range(args.block):
                    text, vector = queries[(done + i) % len(queries)]
                    times[name].append(await _timed(conn, query, params(text, vector)))
            done += args.block

        cur = await conn.execute("EXPLAIN (COSTS OFF) " + bare_vector, ([kb], queries[0][1]))
        plan = " / ".join(str(row[0]).strip() for row in await cur.fetchall())

    p = {name: (percentile(t, 0.5), percentile(t, 0.99)) for name, t in times.items()}
    print_table(
        "search latency, ms (one connection, sequential)",
        ("variant", "n", "p50", "p99"),
        [(name, len(times[name]), f"{p50:.2f}", f"{p99:.2f}") for name, (p50, p99) in p.items()],
    )
    text_ratio = p["yuxi text"][0] / p["bare ts_rank"][0]
    both = p["bare ts_rank"][0] + p["bare vector"][0]
    hybrid_ratio = p["yuxi hybrid"][0] / both
    print_table(
        "ratios (p50)",
        ("comparison", "ratio", "target", "verdict"),
        [
            (
                "yuxi text / bare ts_rank",
                f"{text_ratio:.2f}x",
                f"<= {TARGET}x",
                verdict(text_ratio <= TARGET),
            ),
            (
                "yuxi hybrid / (bare ts_rank + bare vector)",
                f"{hybrid_ratio:.2f}x",
                f"<= {TARGET}x",
                verdict(hybrid_ratio <= TARGET),
            ),
            (
                "yuxi hybrid / bare vector",
                f"{p['yuxi hybrid'][0] / p['bare vector'][0]:.2f}x",
                "-",
                "-",
            ),
        ],
    )
    print_table(
        "ingestion",
        ("path", "chunks/s"),
        [
            (
                f"kb_chunks_add + ready ({dims}-d embeddings{', HNSW' if pgvector else ''})",
                f"{chunks_per_second:.0f}",
            ),
            ("ingest_document end to end (text, no embeddings)", f"{e2e:.0f}"),
        ],
    )
    print(f"\n  bare vector plan: {plan}")
    return 0


if __name__ == "__main__":
    sys.exit(
        run_benchmark("knowledge", "knowledge search and ingestion", parser().parse_args(), measure)
    )
