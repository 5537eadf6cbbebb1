"""Manifest v2: what a run was prepared with, fingerprinted, written once.

Digests, not content: the configurable fields (with the model override, schema defaults
and workspace prompts) go into ``config_digest``; prompt text, memory and secrets never
appear. Identity (user, thread, run, worker) is excluded so a retry of the same run on
another worker derives the same manifest unless its configuration really changed.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from yuxi.queue.runs import RunClaim
from yuxi.resources import RESOURCE_KINDS, manifest_entries
from yuxi.runtime.prepare import PreparedContext

MANIFEST_VERSION = 2


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: one text for one value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _digested(configurable: dict[str, Any], context: Any, claim: RunClaim) -> dict[str, Any]:
    """What the config digest covers: the agent's settings, the workspace prompt, and a
    LangGraph client's own config.configurable keys when it sent any."""
    material = {"configurable": configurable, "workspace_prompt": context.workspace_prompt}
    passed = claim.input.payload.get("configurable")
    if passed:
        material["client_configurable"] = passed
    return material


def build_manifest(prepared: PreparedContext, claim: RunClaim) -> dict[str, Any]:
    context = prepared.context
    configurable = context.configurable_values()
    # each kind's narrowed selection, under the Context field's name (the seed's)
    resources = {
        kind.context_field: list(getattr(context, kind.context_field) or [])
        for kind in RESOURCE_KINDS
    }
    subagents = getattr(context, "subagents", None)
    if subagents is not None:
        resources["subagents"] = list(subagents)
    return {
        "version": MANIFEST_VERSION,
        "agent": {"slug": claim.run.agent_slug, "backend_id": claim.agent.backend_id},
        "run_type": claim.run.run_type,
        "model": context.model,
        # the registry's model (flags, parameters, its version; never the key): a model
        # changed between two attempts gives another manifest (manifest_conflict)
        "model_snapshot": _snapshot(context.registered_model),
        "tool_approval_mode": context.tool_approval_mode,
        "config_digest": sha256_hex(canonical_json(_digested(configurable, context, claim))),
        "resources": resources,
        # ids and names of the knowledge bases the run may search, never their content;
        # the MCP servers the run connects to and their versions, never headers or env
        **{
            kind.name: manifest_entries(kind, getattr(context.resolved, kind.resolved_field))
            for kind in RESOURCE_KINDS
            if kind.resolved_field is not None
        },
        # each skill's source (shared, personal), version and the sha256 of its files:
        # a skill changed between two attempts gives another manifest (manifest_conflict)
        "skills": prepared.skills.manifest_entries() if prepared.skills else [],
        # the instructions put in the prompt from the start: their digest and size
        "skills_preloaded": prepared.skills.preloaded if prepared.skills else {},
        "preloaded": {
            f.name: {"sha256": f.sha256, "bytes": f.bytes_read, "truncated": f.truncated}
            for f in prepared.prompt_files
        },
    }


def manifest_fingerprint(manifest: dict[str, Any]) -> str:
    return sha256_hex(canonical_json(manifest))


def _snapshot(registered: object) -> dict[str, Any] | None:
    snapshot = getattr(registered, "snapshot", None)
    if not callable(snapshot):
        return None
    return {**snapshot(), "version": getattr(registered, "version", None)}
