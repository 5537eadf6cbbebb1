"""The worker process: procrastinate delivers runs; yuxi executes them under leases."""
