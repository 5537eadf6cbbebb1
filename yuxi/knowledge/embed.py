"""Embeddings through an OpenAI-compatible endpoint (``openai:<model>``: the base URL
and key of the chat models, YUXI_OPENAI_BASE_URL and YUXI_OPENAI_API_KEY). Vectors are
normalised to length 1, so cosine similarity is a dot product in SQL. The key never
leaves this module: an error that mentions it is re-raised with the key masked.

langchain_openai (over a second to import) loads with the first ``Embedder``, not with
the module: the API imports this module for ``check_embedding_model`` alone."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from yuxi.agents.models.config import (
    DEFAULT_OPENAI_BASE_URL,
    ModelSettings,
    ModelSpecError,
    parse_model_spec,
)

BATCH = 64
# what the first Embedder imports (a serving process may import it in the background)
EMBEDDING_MODULES = ("langchain_openai", "pydantic")
_MASK = "[redacted]"
_NO_KEY = "not-configured"


class EmbeddingError(RuntimeError):
    """Embedding failed; ``transient`` when trying again later may work (a network
    error, a 429 or a 5xx). The message never holds the API key."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def check_embedding_model(spec: str) -> str:
    """``spec`` when it names an embedding model yuxi can call (``openai:<model>``)."""
    parsed = parse_model_spec(spec)
    if parsed.provider != "openai":
        raise ModelSpecError(
            f"embedding model {spec!r}: embeddings come from an OpenAI-compatible endpoint,"
            " e.g. 'openai:text-embedding-3-small'"
        )
    return str(parsed)


class Embedder:
    """Embeds texts with one model, ``BATCH`` texts per request."""

    def __init__(self, spec: str, settings: ModelSettings | None = None) -> None:
        from langchain_openai import OpenAIEmbeddings
        from pydantic import SecretStr

        self.spec = check_embedding_model(spec)
        self._settings = settings or ModelSettings.from_env()
        key = self._settings.openai_api_key
        if key is None and self._settings.openai_base_url.rstrip("/") == DEFAULT_OPENAI_BASE_URL:
            raise EmbeddingError(
                f"{self.spec} needs an API key: set YUXI_OPENAI_API_KEY", transient=False
            )
        self._secret = key.get_secret_value() if key is not None else ""
        self._client = OpenAIEmbeddings(
            model=parse_model_spec(spec).model,
            base_url=self._settings.openai_base_url,
            api_key=key or SecretStr(_NO_KEY),
            # offline: no tiktoken download to split long inputs; chunks are short
            check_embedding_ctx_length=False,
            chunk_size=BATCH,
            max_retries=self._settings.max_retries,
            timeout=self._settings.request_timeout,
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text."""
        if not texts:
            return []
        try:
            vectors = await self._client.aembed_documents(list(texts))
        except Exception as error:
            raise self._error(error) from None
        return [normalised(vector) for vector in vectors]

    async def embed_query(self, text: str) -> list[float]:
        try:
            return normalised(await self._client.aembed_query(text))
        except Exception as error:
            raise self._error(error) from None

    def _error(self, error: Exception) -> EmbeddingError:
        message = f"{type(error).__name__}: {error}"
        if self._secret:
            message = message.replace(self._secret, _MASK)
        return EmbeddingError(
            f"embedding with {self.spec} failed: {message}", transient=_transient(error)
        )


def _transient(error: Exception) -> bool:
    import openai

    if isinstance(
        error, openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError
    ):
        return True
    status: Any = getattr(error, "status_code", None)
    return isinstance(status, int) and status >= 500


def normalised(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    norm = math.sqrt(sum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm else [0.0 for _ in vector]
