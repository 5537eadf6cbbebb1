"""Executing one run: Context preparation, workspace prompts, manifest, executor, state."""
