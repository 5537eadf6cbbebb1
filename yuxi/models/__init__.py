"""The model registry (``registry``), keys sealed under the server key
(``secret_box``), a run's token usage (``usage``) and its credit budget (``budget``).
Loading a chat model from a spec is the agents' own (``yuxi.agents.models``)."""
