// One run in detail: status, type, timing, error, usage when recorded, the committed
// manifest (with its fingerprint) and the raw stored events.

import { api } from "../api.js";
import { duration, field, fill, formatTime, h, json } from "../dom.js";
import { t } from "../i18n.js";
import { readAllEvents } from "../sse.js";
import { formatCost, usageTable } from "./usage.js";

function row(label, value, cls) {
  return [h("dt", {}, label), h("dd", { class: cls || null }, value ?? "—")];
}

export default {
  id: "run",
  label: "panel.run",
  requires: ["/api/agent/runs/{run_id}", "/api/agent/runs/{run_id}/manifest"],
  needsThread: true,
  mount(ctx, host) {
    const picker = h("select", { name: "run" });
    const details = h("div", { class: "run-details" });
    const threadUsage = h("section", { class: "thread-usage", hidden: true });
    fill(host, h("h2", {}, t("panel.run")), field(t("run.pick"), picker), details, threadUsage);
    let shown = null;
    let usageDrawn = 0;

    // the thread's usage, every run (subagent runs included), per model
    async function showThreadUsage() {
      if (!ctx.threadId || !ctx.has("/api/agent/threads/{thread_id}/usage")) return;
      const mine = ++usageDrawn;
      const threadId = ctx.threadId;
      try {
        const usage = await api("GET", `/api/agent/threads/${threadId}/usage`);
        if (mine !== usageDrawn || threadId !== ctx.threadId) return;
        threadUsage.hidden = false;
        fill(
          threadUsage,
          h("h3", {}, t("run.threadUsage")),
          usage.by_model.length
            ? [
                h("p", { class: "thread-usage-total" }, t("usage.summary", { input: usage.input_tokens, output: usage.output_tokens, cost: formatCost(usage.cost) })),
                usageTable(usage.by_model, { runs: false }),
              ]
            : h("p", { class: "empty" }, t("usage.none")),
        );
      } catch (e) {
        if (mine === usageDrawn) fill(threadUsage, h("p", { class: "hint" }, `${e.code}: ${e.message}`));
      }
    }

    function fillPicker() {
      const runs = (ctx.history && ctx.history.runs) || [];
      if (!ctx.selectedRunId && runs.length) ctx.selectedRunId = runs[runs.length - 1].run_id;
      fill(
        picker,
        runs
          .map((run, index) =>
            h(
              "option",
              { value: run.run_id, selected: run.run_id === ctx.selectedRunId },
              `${index + 1}. ${t(`runType.${run.run_type}`)} · ${t(`run.${run.status}`)} · ${formatTime(run.timing.created_at)}`,
            ),
          )
          .reverse(),
      );
      if (ctx.selectedRunId && ctx.selectedRunId !== shown) show(ctx.selectedRunId);
      if (!runs.length) fill(details, h("p", { class: "empty" }, t("run.none")));
    }

    async function show(runId) {
      shown = runId;
      fill(details, h("p", {}, t("common.loading")));
      let view;
      try {
        view = await api("GET", `/api/agent/runs/${runId}`);
      } catch (e) {
        fill(details, h("p", { class: "error", role: "alert" }, `${e.code}: ${e.message}`));
        return;
      }
      if (shown !== runId) return;
      const timing = view.timing;
      const manifest = h("div", { class: "manifest" }, h("p", {}, t("common.loading")));
      const events = h("div", { class: "events" });
      const loadEvents = h("button", { type: "button" }, t("run.loadEvents"));
      loadEvents.addEventListener("click", async () => {
        fill(events, h("p", {}, t("common.loading")));
        try {
          const all = await readAllEvents(runId);
          fill(
            events,
            h(
              "ol",
              { class: "event-list" },
              all.map((event) => h("li", {}, h("code", {}, `${event.seq ?? ""} ${event.event}`), h("pre", {}, json(event.data)))),
            ),
          );
        } catch (e) {
          fill(events, h("p", { class: "error" }, `${e.code}: ${e.message}`));
        }
      });
      fill(
        details,
        h(
          "dl",
          { class: "facts" },
          row(t("run.status"), t(`run.${view.status}`), `run-status run-status-${view.status}`),
          row(t("run.type"), t(`runType.${view.run_type}`)),
          row(t("run.id"), view.run_id, "mono"),
          row(t("run.request"), view.request_id, "mono"),
          view.created_by_run_id ? row(t("run.createdBy"), view.created_by_run_id, "mono") : null,
          row(t("run.created"), formatTime(timing.created_at)),
          row(t("run.started"), formatTime(timing.started_at)),
          row(t("run.finished"), formatTime(timing.finished_at)),
          row(t("run.waited"), duration(timing.created_at, timing.started_at)),
          row(t("run.took"), duration(timing.started_at, timing.finished_at)),
          view.error_type ? row(t("run.error"), `${view.error_type}: ${view.error_message || ""}`, "run-error") : null,
          view.usage
            ? row(t("run.usage"), h("span", { class: "run-usage" }, t("usage.summary", { input: view.usage.input_tokens, output: view.usage.output_tokens, cost: formatCost(view.usage.cost) })))
            : null,
        ),
        view.usage ? h("details", {}, h("summary", {}, t("run.usageJson")), h("pre", {}, json(view.usage))) : null,
        h("h3", {}, t("run.manifest")),
        manifest,
        h("h3", {}, t("run.events")),
        loadEvents,
        events,
      );
      try {
        const response = await api("GET", `/api/agent/runs/${runId}/manifest`, undefined, { raw: true });
        const body = await response.json();
        fill(
          manifest,
          h(
            "dl",
            { class: "facts" },
            row(t("run.configDigest"), body.config_digest, "mono config-digest"),
            row(t("run.fingerprint"), (response.headers.get("etag") || "").replaceAll('"', ""), "mono"),
            row(t("run.model"), body.model),
          ),
          h("details", {}, h("summary", {}, t("run.manifestJson")), h("pre", {}, json(body))),
        );
      } catch (e) {
        fill(manifest, h("p", { class: "hint" }, `${e.code}: ${e.message}`));
      }
    }

    picker.addEventListener("change", () => {
      ctx.selectedRunId = picker.value;
      show(picker.value);
    });
    fillPicker();
    showThreadUsage();
    const off = [
      ctx.on("thread-loaded", () => {
        fillPicker();
        showThreadUsage();
      }),
      ctx.on("run-selected", (runId) => {
        if (runId !== shown) fillPicker();
      }),
      ctx.on("run-ended", (runId) => {
        if (runId === shown) shown = null;
      }),
    ];
    return () => off.forEach((fn) => fn());
  },
};
