// The agent's state (GET /state): todos, files, artifacts, subagent runs.

import { api } from "../api.js";
import { fill, formatBytes, formatTime, h } from "../dom.js";
import { t } from "../i18n.js";

export default {
  id: "state",
  label: "panel.state",
  requires: ["/api/chat/thread/{thread_id}/state"],
  needsThread: true,
  mount(ctx, host) {
    const body = h("div", { class: "state" });
    fill(host, h("h2", {}, t("panel.state")), body);

    async function refresh() {
      let state;
      try {
        state = await api("GET", `/api/chat/thread/${ctx.threadId}/state`);
      } catch (e) {
        fill(body, h("p", { class: "error", role: "alert" }, `${e.code}: ${e.message}`));
        return;
      }
      const s = state.agent_state || {};
      const todos = s.todos || [];
      const files = s.files || [];
      const artifacts = s.artifacts || [];
      const subagents = s.subagent_runs || [];
      fill(
        body,
        h("p", {}, t("state.messages", { n: s.message_count ?? 0 })),
        state.interrupt ? h("p", { class: "notice" }, t("state.interrupted")) : null,
        h("h3", {}, t("state.todos")),
        todos.length
          ? h(
              "ul",
              { class: "todos" },
              todos.map((todo) =>
                h("li", { class: `todo todo-${todo.status || ""}` }, h("span", { class: "badge" }, t(`todo.${todo.status || "pending"}`)), " ", todo.content ?? JSON.stringify(todo)),
              ),
            )
          : h("p", { class: "empty" }, t("state.noTodos")),
        h("h3", {}, t("state.files", { n: files.length })),
        files.length ? h("ul", { class: "file-list" }, files.slice(0, 200).map((f) => h("li", {}, f.path, h("small", {}, ` ${formatBytes(f.bytes)}`)))) : h("p", { class: "empty" }, t("files.emptyDir")),
        h("h3", {}, t("state.artifacts", { n: artifacts.length })),
        artifacts.length ? h("ul", { class: "file-list" }, artifacts.map((f) => h("li", {}, f.path))) : h("p", { class: "empty" }, t("files.noArtifacts")),
        h("h3", {}, t("state.subagents")),
        subagents.length
          ? h(
              "ul",
              { class: "subagents" },
              subagents.map((run) =>
                h(
                  "li",
                  {},
                  h("button", { type: "button", class: "link", onclick: () => ctx.openRun(run.run_id) }, run.agent_slug),
                  " ",
                  h("span", { class: "badge" }, t(`run.${run.status}`)),
                  ` ${formatTime(run.created_at)}`,
                  run.error_message ? h("span", { class: "run-error" }, ` ${run.error_message}`) : null,
                ),
              ),
            )
          : h("p", { class: "empty" }, t("state.noSubagents")),
      );
    }

    refresh();
    const off = [ctx.on("run-ended", refresh), ctx.on("files-changed", refresh)];
    return () => off.forEach((fn) => fn());
  },
};
