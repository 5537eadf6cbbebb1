"""``python -m yuxi.cli``."""

from __future__ import annotations

from yuxi.cli import main

main()
