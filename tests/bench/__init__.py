"""Queue-core benchmarks, run as scripts: ``uv run python -m tests.bench.<name>``.

Not part of the default pytest run. See docs/benchmarks.md for what each one measures
and the figures recorded on the reference machine.
"""

from __future__ import annotations
