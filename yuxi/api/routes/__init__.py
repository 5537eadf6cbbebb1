"""Route handlers, one module per area of CONTRACT.md."""
