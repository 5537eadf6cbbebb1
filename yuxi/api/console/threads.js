// The caller's threads with their thread_status badges (loading / ready / done), and a
// new thread with an agent picker. Refreshed every few seconds and after every change.

import { api } from "./api.js";
import { field, fill, h } from "./dom.js";
import { t } from "./i18n.js";

const REFRESH_MS = 4000;

export function statusBadge(status) {
  return h("span", { class: `badge status-${status}`, dataset: { status } }, t(`status.${status}`));
}

export function mountThreadList(ctx, host) {
  const agentSelect = h("select", { name: "agent" });
  const title = h("input", { name: "title", maxlength: "200", autocomplete: "off" });
  const error = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    { class: "new-thread", "aria-label": t("threads.new") },
    h("h2", {}, t("threads.new")),
    field(t("threads.agent"), agentSelect),
    field(t("threads.title"), title),
    h("button", { type: "submit" }, t("threads.create")),
    error,
  );
  const list = h("ul", { class: "thread-list", "aria-label": t("threads.list") });
  fill(host, form, h("h2", {}, t("threads.list")), list);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      const thread = await api("POST", "/api/chat/thread", {
        agent_id: agentSelect.value,
        title: title.value.trim(),
      });
      title.value = "";
      await refresh();
      location.hash = `#/thread/${thread.id}`;
    } catch (e) {
      error.textContent = `${e.code}: ${e.message}`;
    }
  });

  let threads = [];
  async function refresh() {
    try {
      threads = await api("GET", "/api/chat/threads");
    } catch {
      return;
    }
    render();
  }

  function render() {
    fill(
      list,
      threads.length
        ? threads.map((thread) =>
            h(
              "li",
              { class: thread.id === ctx.threadId ? "current" : "" },
              h(
                "a",
                {
                  href: `#/thread/${thread.id}`,
                  "aria-current": thread.id === ctx.threadId ? "page" : null,
                  dataset: { threadId: thread.id },
                },
                h("span", { class: "thread-title" }, thread.title || t("threads.untitled")),
                h("span", { class: "thread-agent" }, thread.agent_id),
                statusBadge(thread.thread_status),
              ),
            ),
          )
        : h("li", { class: "empty" }, t("threads.none")),
    );
  }

  (async () => {
    try {
      const agents = await api("GET", "/api/agents");
      fill(
        agentSelect,
        agents
          .filter((agent) => !agent.is_subagent)
          .map((agent) => h("option", { value: agent.id }, `${agent.name} (${agent.id})`)),
      );
    } catch (e) {
      error.textContent = `${e.code}: ${e.message}`;
    }
  })();
  refresh();
  const timer = setInterval(() => {
    if (document.visibilityState === "visible") refresh();
  }, REFRESH_MS);
  const off = [
    ctx.on("threads-changed", refresh),
    ctx.on("thread-selected", render),
  ];
  return () => {
    clearInterval(timer);
    for (const fn of off) fn();
  };
}
