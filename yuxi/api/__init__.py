"""The HTTP API: a thin litestar adapter over the queue, runtime and SQL functions."""
