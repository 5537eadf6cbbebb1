"""A local HTTP server speaking the OpenAI chat completions API, for tests.

It runs in a thread of the test process; clients talk to it over real HTTP.
Behaviour, chosen by the request:
- model ``boom``: HTTP 500 with an OpenAI-style error body;
- model ``echo-key``: HTTP 500 whose body echoes the Authorization header (a badly
  behaved proxy), to prove the key is masked;
- tools offered and the last message is from the user: one tool call to the first tool;
- last message is a tool result: ``tool said <content>``;
- otherwise: ``Hello from the stub server``.
``"stream": true`` answers as SSE ``data:`` lines in several chunks, and, when the
request asks with ``stream_options.include_usage``, a last chunk with the usage. Every
call reports ``USAGE`` (3 prompt and 5 completion tokens).

``/v1/embeddings``: a deterministic embedding of EMBEDDING_DIMS dimensions, the counts
of the text's words and CJK two-character grams hashed into buckets (texts that share
words are near); base64 or float lists as asked. Model ``embed-boom``: HTTP 500; model
``embed-slow``: answers after ``StubServer.embedding_delay`` seconds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT = "Hello from the stub server"
TOOL_ARGS = {"city": "Paris"}
# what every call reports, streamed (when asked with stream_options) or not
USAGE = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}

EMBEDDING_DIMS = 64
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_WORD = re.compile(r"[a-z0-9]+")


def stub_embedding(text: str) -> list[float]:
    """What the stub answers for ``text`` (not normalised)."""
    vector = [0.0] * EMBEDDING_DIMS
    terms = _WORD.findall(text.lower())
    for run in _CJK_RUN.findall(text):
        terms.extend(run[i : i + 2] for i in range(max(len(run) - 1, 1)))
    for term in terms:
        bucket = int.from_bytes(hashlib.sha256(term.encode()).digest()[:4], "big")
        vector[bucket % EMBEDDING_DIMS] += 1.0
    return vector


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]


@dataclass
class StubServer:
    base_url: str
    requests: list[Received] = field(default_factory=list)
    embedding_delay: float = 0.0


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: the connection closes after each response, which ends an SSE stream.
    protocol_version = "HTTP/1.0"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.stub.requests.append(
            Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        if self.path == "/v1/embeddings":
            self._embeddings(body)
            return
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        model = body.get("model")
        if model == "boom":
            error = {"message": "upstream exploded", "type": "server_error", "code": None}
            self._json(500, {"error": error})
            return
        if model == "echo-key":
            echoed = f"bad credentials: {self.headers.get('Authorization')}"
            self._json(500, {"error": {"message": echoed, "type": "server_error"}})
            return
        last = body["messages"][-1]
        if body.get("tools") and last["role"] == "user":
            name = body["tools"][0]["function"]["name"]
            self._reply(body, model, tool=name)
        elif last["role"] == "tool":
            self._reply(body, model, text=f"tool said {last['content']}")
        else:
            self._reply(body, model, text=TEXT)

    def _embeddings(self, body: dict[str, Any]) -> None:
        if body.get("model") == "embed-boom":
            self._json(500, {"error": {"message": "embeddings exploded", "type": "server_error"}})
            return
        if body.get("model") == "embed-slow":
            time.sleep(self.server.stub.embedding_delay)
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        data = []
        for index, text in enumerate(texts):
            vector = stub_embedding(text if isinstance(text, str) else " ".join(map(str, text)))
            if body.get("encoding_format") == "base64":
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding: Any = base64.b64encode(packed).decode()
            else:
                embedding = vector
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        self._json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
            },
        )

    def _reply(self, body: dict[str, Any], model: str, *, text: str = "", tool: str = "") -> None:
        call = {
            "index": 0,
            "id": "call_stub_1",
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps(TOOL_ARGS)},
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool:
                message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"}]
            self._json(
                200,
                {
                    "id": "chatcmpl-stub",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if tool else "stop",
                        }
                    ],
                    "usage": USAGE,
                },
            )
            return
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if tool:
            arguments = json.dumps(TOOL_ARGS)
            half = len(arguments) // 2
            first = {**call, "function": {"name": tool, "arguments": arguments[:half]}}
            deltas.append({"tool_calls": [first]})
            deltas.append(
                {"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]}
            )
        else:
            deltas.extend({"content": piece} for piece in _pieces(text))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta in deltas:
            self._event(model, delta, None)
        self._event(model, {}, "tool_calls" if tool else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            # as OpenAI does: a last chunk without choices, carrying the call's usage
            usage = {
                "id": "chatcmpl-stub",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": USAGE,
            }
            self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, model: str, delta: dict[str, Any], finish: str | None) -> None:
        chunk = {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubServer


@contextmanager
def stub_server() -> Iterator[StubServer]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.stub = StubServer(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    # A short poll interval keeps shutdown() (and so each test's teardown) fast.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield httpd.stub
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
