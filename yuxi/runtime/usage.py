"""What one run's model calls spent: a LangChain ``UsageMetadataCallbackHandler`` in the
graph's config (it also sees summarisation calls), turned into ``yuxi.run_usage`` rows
with the run's finish. A subagent run has a collector of its own."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler

from yuxi.agents.models import RegisteredModel

MILLION = Decimal(1_000_000)


class RunUsage(UsageMetadataCallbackHandler):
    """Token counts by the provider's model name, for one run. The executor sets
    ``spec`` and ``registered`` once the Context is prepared."""

    def __init__(self) -> None:
        super().__init__()
        self.spec = ""
        self.registered: RegisteredModel | None = None

    def finished(self) -> list[dict[str, Any]]:
        """The rows for the run's finish (none before a model was called)."""
        return self.rows(self.spec, self.registered) if self.spec else []

    def rows(self, spec: str, registered: RegisteredModel | None) -> list[dict[str, Any]]:
        """One row per model called: its spec (the run's own when the name is the
        run's model, else ``<provider>:<name>``), tokens, cost (prices of the registry
        model; none for a user's own model or without prices) and whether it was BYOK."""
        provider, _, name_of_run_model = spec.partition(":")
        rows = []
        for name, usage in sorted(self.usage_metadata.items()):
            model = spec if name in ("", name_of_run_model) else f"{provider}:{name}"
            inputs = int(usage.get("input_tokens", 0))
            outputs = int(usage.get("output_tokens", 0))
            cached = int((usage.get("input_token_details") or {}).get("cache_read", 0) or 0)
            reasoning = int((usage.get("output_token_details") or {}).get("reasoning", 0) or 0)
            own = registered if registered is not None and model == spec else None
            rows.append(
                {
                    "model": model,
                    "input_tokens": inputs,
                    "output_tokens": outputs,
                    "cached_tokens": cached,
                    "reasoning_tokens": reasoning,
                    "cost": _cost(own, inputs, outputs, cached),
                    "byok": bool(own and own.byok),
                }
            )
        return rows


def _cost(model: RegisteredModel | None, inputs: int, outputs: int, cached: int) -> str | None:
    if model is None or model.byok:
        return None
    prices = (model.price_input_per_mtok, model.price_output_per_mtok)
    if all(price is None for price in prices):
        return None
    cached_price = model.price_cached_per_mtok
    if cached_price is None:
        cached_price = model.price_input_per_mtok
    total = (
        Decimal(inputs - cached) * Decimal(str(model.price_input_per_mtok or 0))
        + Decimal(cached) * Decimal(str(cached_price or 0))
        + Decimal(outputs) * Decimal(str(model.price_output_per_mtok or 0))
    ) / MILLION
    return str(total.quantize(Decimal("0.00000001")))
