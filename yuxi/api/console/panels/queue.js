// The thread's queue: queued requests with their positions, steer and cancel, why the
// backlog is paused and continue.

import { api } from "../api.js";
import { fill, h } from "../dom.js";
import { t } from "../i18n.js";

const POLL_MS = 1500;

export default {
  id: "queue",
  label: "panel.queue",
  requires: ["/api/agent/thread/{thread_id}/requests"],
  needsThread: true,
  mount(ctx, host) {
    const threadId = ctx.threadId;
    const summary = h("div", { class: "queue-state", role: "status" });
    const list = h("ol", { class: "queue-list", "aria-label": t("queue.queued") });
    const error = h("p", { class: "error", role: "alert" });
    fill(host, h("h2", {}, t("panel.queue")), summary, list, error);
    let busy = false;

    async function act(method, path) {
      error.textContent = "";
      try {
        await api(method, path);
      } catch (e) {
        error.textContent = `${e.code}: ${e.message}`;
      }
      await refresh();
      ctx.emit("thread-reload");
    }

    function textOf(request) {
      const messages = (ctx.history && ctx.history.history) || [];
      const message = messages.find((m) => m.id === request.message_id);
      return message ? message.content : request.request_id;
    }

    let again = false; // a change heard while a read is under way: read once more after it
    async function refresh() {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      let data;
      try {
        data = await api("GET", `/api/agent/thread/${threadId}/requests`);
      } catch (e) {
        error.textContent = `${e.code}: ${e.message}`;
        return;
      } finally {
        busy = false;
        if (again) {
          again = false;
          setTimeout(refresh, 0);
        }
      }
      const queue = data.queue;
      const running = queue.status === "running";
      fill(
        summary,
        h("span", { class: `badge queue-${queue.status}` }, t(`queue.status.${queue.status}`)),
        queue.paused_reason ? h("p", { class: "paused-reason" }, t(`queue.reason.${queue.paused_reason}`)) : null,
        queue.can_continue
          ? h("button", { type: "button", class: "primary", onclick: () => act("POST", `/api/agent/thread/${threadId}/requests/continue`) }, t("queue.continue"))
          : null,
      );
      const queued = data.requests
        .filter((request) => request.status === "queued")
        .sort((a, b) => a.queue_position - b.queue_position);
      fill(
        list,
        queued.length
          ? queued.map((request) =>
              h(
                "li",
                { dataset: { requestId: request.request_id, position: request.queue_position } },
                h("span", { class: "position" }, t("queue.position", { n: request.queue_position })),
                h("span", { class: "queued-text" }, textOf(request)),
                request.queue_policy === "steer" ? h("span", { class: "badge" }, t("policy.steer")) : null,
                request.queue_policy === "enqueue" && running
                  ? h("button", { type: "button", onclick: () => act("POST", `/api/agent/requests/${encodeURIComponent(request.request_id)}/steer`) }, t("queue.steer"))
                  : null,
                h("button", { type: "button", onclick: () => act("POST", `/api/agent/requests/${encodeURIComponent(request.request_id)}/cancel`) }, t("queue.cancel")),
              ),
            )
          : h("li", { class: "empty" }, t("queue.empty")),
      );
    }

    refresh();
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") refresh();
    }, POLL_MS);
    const off = [ctx.on("queue-changed", refresh), ctx.on("thread-loaded", refresh)];
    return () => {
      clearInterval(timer);
      for (const fn of off) fn();
    };
  },
};
