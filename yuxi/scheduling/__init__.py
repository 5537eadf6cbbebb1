"""Scheduled agent jobs: cron parsing, next-fire computation, the ticker."""
