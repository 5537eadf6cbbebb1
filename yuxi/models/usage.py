"""What one run's model calls spent: a LangChain ``UsageMetadataCallbackHandler`` fed by
the models' own callback (yuxi/agents/models/usage.py), turned into the rows
``yuxi.run_finish`` records (and prices, from the registry) with the run's finish. A
subagent run has a collector of its own."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler


class RunUsage(UsageMetadataCallbackHandler):
    """Token counts by the provider's model name, for one run. The executor sets
    ``spec`` once the Context is prepared."""

    def __init__(self) -> None:
        super().__init__()
        self.spec = ""

    def finished(self) -> list[dict[str, Any]]:
        """One row per model called (none before a model was called): its spec (the
        run's own when the name is the run's model, else ``<provider>:<name>``) and its
        tokens."""
        if not self.spec:
            return []
        provider, _, name_of_run_model = self.spec.partition(":")
        rows = []
        for name, usage in sorted(self.usage_metadata.items()):
            rows.append(
                {
                    "model": self.spec if name in ("", name_of_run_model) else f"{provider}:{name}",
                    "input_tokens": int(usage.get("input_tokens", 0)),
                    "output_tokens": int(usage.get("output_tokens", 0)),
                    "cached_tokens": int(
                        (usage.get("input_token_details") or {}).get("cache_read", 0) or 0
                    ),
                    "reasoning_tokens": int(
                        (usage.get("output_token_details") or {}).get("reasoning", 0) or 0
                    ),
                }
            )
        return rows
