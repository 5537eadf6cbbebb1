"""Agents: context schemas, the BaseAgent abstraction, built-in backends, models, tools.

This package knows nothing about HTTP or the queue.
"""
