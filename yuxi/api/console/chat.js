// One thread: its history (then `viewed`), the live run streamed over SSE, the
// interrupt waiting for an answer or an approval, and the composer.

import { ApiError, api } from "./api.js";
import { confirmButton, duration, field, fill, h, json } from "./dom.js";
import { t } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { streamRun } from "./sse.js";
import { statusBadge } from "./threads.js";

const ACTIVE = new Set(["pending", "running", "cancel_requested"]);

export function latestTopLevelRun(runs) {
  const top = (runs || []).filter((run) => run.run_type !== "subagent");
  return top.length ? top[top.length - 1] : null;
}

function errorText(error) {
  return `${error.code || error.error_type || "error"}: ${error.message || error.error_message || ""}`;
}

function toolCall(call) {
  return h(
    "details",
    { class: "tool tool-call" },
    h("summary", {}, t("chat.toolCall", { name: call.name })),
    h("pre", {}, json(call.args)),
  );
}

function toolResult(name, status, content) {
  return h(
    "details",
    { class: `tool tool-result tool-${status}` },
    h("summary", {}, t("chat.toolResult", { name, status: t(`tool.${status}`) })),
    h("pre", {}, typeof content === "string" ? content : json(content)),
  );
}

function messageView(message) {
  if (message.role === "user") {
    const badge =
      message.delivery_status && !["dispatched", "complete"].includes(message.delivery_status)
        ? h("span", { class: `badge delivery-${message.delivery_status}` }, t(`delivery.${message.delivery_status}`))
        : null;
    return h(
      "article",
      { class: "msg user", dataset: { messageId: message.id } },
      h("div", { class: "who" }, t("role.user"), badge),
      h("div", { class: "text" }, message.content),
    );
  }
  if (message.role === "tool") {
    const meta = message.metadata || {};
    return h("div", { class: "msg tool-msg" }, toolResult(meta.name || "?", meta.status || "success", message.content));
  }
  const calls = (message.metadata && message.metadata.tool_calls) || [];
  return h(
    "article",
    { class: "msg assistant", dataset: { messageId: message.id } },
    h("div", { class: "who" }, t("role.assistant")),
    message.content ? h("div", { class: "text markdown" }, renderMarkdown(message.content)) : null,
    calls.map(toolCall),
  );
}

export function mountChat(ctx, main, threadId) {
  let disposed = false;
  let loadSeq = 0;
  let stream = null; // {runId, controller}
  let runErrors = new Map();
  const title = h("h2", { class: "thread-title" });
  const meta = h("span", { class: "thread-meta" });
  const actions = h("span", { class: "thread-actions" });
  const header = h("header", { class: "thread-header" }, title, meta, actions);
  const messages = h("div", { class: "messages", role: "log", "aria-live": "polite", "aria-label": t("chat.messages") });
  const live = h("div", { class: "live", hidden: true });
  const interrupt = h("section", { class: "interrupt", hidden: true, "aria-label": t("chat.interrupt") });
  const alert = h("p", { class: "error", role: "alert" });
  const notice = h("p", { class: "notice", role: "status" });

  // -- composer -------------------------------------------------------------------
  const input = h("textarea", { name: "message", rows: "3", placeholder: t("chat.placeholder") });
  const policy = h(
    "select",
    { name: "queue_policy" },
    ["enqueue", "steer", "reject"].map((p) => h("option", { value: p }, t(`policy.${p}`))),
  );
  const approval = h(
    "select",
    { name: "tool_approval_mode" },
    h("option", { value: "" }, t("approval.default")),
    h("option", { value: "auto" }, t("approval.auto")),
    h("option", { value: "ask" }, t("approval.ask")),
  );
  const attach = h("input", { type: "file", multiple: true, name: "file" });
  const attached = h("span", { class: "attached" });
  const send = h("button", { type: "submit", class: "primary" }, t("chat.send"));
  const cancel = h("button", { type: "button", class: "cancel-run", hidden: true }, t("chat.cancelRun"));
  const composer = h(
    "form",
    { class: "composer", "aria-label": t("chat.composer") },
    field(t("chat.message"), input, t("chat.keys")),
    h(
      "div",
      { class: "composer-row" },
      field(t("chat.policy"), policy),
      field(t("chat.approval"), approval),
      field(t("chat.attach"), attach),
      attached,
      h("span", { class: "spacer" }),
      cancel,
      send,
    ),
  );
  let attachmentIds = [];

  fill(main, h("section", { class: "chat" }, header, messages, interrupt, alert, notice, composer));

  input.addEventListener("keydown", (event) => {
    // Enter sends, Shift+Enter is a newline; never while an IME composes (Chinese input)
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });

  attach.addEventListener("change", async () => {
    if (!attach.files.length) return;
    const form = new FormData();
    for (const file of attach.files) form.append("file", file);
    try {
      const rows = await api("POST", `/api/chat/thread/${threadId}/attachments`, form);
      attachmentIds.push(...rows.map((row) => row.id));
      fill(attached, rows.map((row) => h("span", { class: "chip" }, row.filename)));
      ctx.emit("files-changed");
    } catch (error) {
      alert.textContent = errorText(error);
    }
    attach.value = "";
  });

  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const query = input.value;
    if (!query.trim()) return;
    alert.textContent = "";
    notice.textContent = "";
    const body = {
      thread_id: threadId,
      query,
      request_id: crypto.randomUUID(),
      queue_policy: policy.value,
    };
    if (approval.value) body.tool_approval_mode = approval.value;
    if (attachmentIds.length) body.attachments = attachmentIds;
    // the box is free for the next message at once; it gets this one back on an error
    input.value = "";
    try {
      const view = await api("POST", "/api/agent/runs", body);
      attachmentIds = [];
      fill(attached);
      if (view.status === "rejected") notice.textContent = t("chat.rejected");
      else if (view.status === "queued") notice.textContent = t("chat.queued", { position: view.queue_position });
      ctx.emit("queue-changed");
      ctx.emit("threads-changed");
      await load();
    } catch (error) {
      alert.textContent = errorText(error);
      if (!input.value) input.value = query;
    } finally {
      input.focus();
    }
  });

  cancel.addEventListener("click", async () => {
    if (!stream) return;
    try {
      await api("POST", `/api/agent/runs/${stream.runId}/cancel`);
      ctx.emit("queue-changed");
    } catch (error) {
      alert.textContent = errorText(error);
    }
  });

  // -- header ---------------------------------------------------------------------
  function renderHeader(thread) {
    fill(title, thread.title || t("threads.untitled"));
    fill(meta, h("span", { class: "agent" }, thread.agent_id), statusBadge(thread.thread_status));
    const rename = h("button", { type: "button" }, t("thread.rename"));
    rename.addEventListener("click", () => {
      const box = h("input", { value: thread.title, maxlength: "200", "aria-label": t("thread.newTitle") });
      const save = h("button", { type: "submit" }, t("common.save"));
      const back = h("button", { type: "button" }, t("common.cancel"));
      const form = h("form", { class: "rename" }, box, save, back);
      back.addEventListener("click", () => renderHeader(thread));
      form.addEventListener("submit", async (e) => {
        e.preventDefault();
        try {
          const updated = await api("PATCH", `/api/chat/thread/${threadId}`, { title: box.value });
          ctx.emit("threads-changed");
          renderHeader(updated);
        } catch (error) {
          alert.textContent = errorText(error);
        }
      });
      fill(title, form);
      box.focus();
    });
    const remove = confirmButton(t("thread.delete"), t("thread.deleteConfirm"), async () => {
      try {
        await api("DELETE", `/api/chat/thread/${threadId}`);
        ctx.emit("threads-changed");
        location.hash = "#/";
      } catch (error) {
        alert.textContent = errorText(error);
      }
    });
    fill(actions, rename, remove);
  }

  // -- history --------------------------------------------------------------------
  function runFooter(run) {
    const error = runErrors.get(run.run_id);
    return h(
      "div",
      { class: `run-footer run-${run.status}`, dataset: { runId: run.run_id } },
      h("span", { class: `badge run-status run-status-${run.status}` }, t(`run.${run.status}`)),
      run.run_type !== "chat" ? h("span", { class: "run-type" }, t(`runType.${run.run_type}`)) : null,
      h("span", { class: "timing" }, duration(run.timing.started_at, run.timing.finished_at)),
      error ? h("span", { class: "run-error", role: "note" }, errorText(error)) : null,
      h("button", { type: "button", class: "link", onclick: () => ctx.openRun(run.run_id) }, t("run.details")),
    );
  }

  function renderHistory(history) {
    const nodes = [];
    const runsById = new Map(history.runs.map((run) => [run.run_id, run]));
    const footed = new Set();
    const list = history.history;
    list.forEach((message, index) => {
      nodes.push(messageView(message));
      const next = list[index + 1];
      const run = message.run_id && runsById.get(message.run_id);
      if (run && (!next || next.run_id !== message.run_id) && !ACTIVE.has(run.status)) {
        // a resume run's messages follow the run it continues: foot each run once, last
        if (!list.slice(index + 1).some((m) => m.run_id === run.run_id)) {
          nodes.push(runFooter(run));
          footed.add(run.run_id);
        }
      }
    });
    for (const run of history.runs) {
      if (!footed.has(run.run_id) && !ACTIVE.has(run.status) && run.run_type !== "subagent") {
        nodes.push(runFooter(run));
      }
    }
    if (!list.length && !history.runs.length) nodes.push(h("p", { class: "empty" }, t("chat.empty")));
    fill(messages, nodes, live);
  }

  async function fetchRunErrors(runs) {
    const missing = runs.filter((run) => run.status === "failed" && !runErrors.has(run.run_id));
    await Promise.all(
      missing.map(async (run) => {
        try {
          const view = await api("GET", `/api/agent/runs/${run.run_id}`);
          runErrors.set(run.run_id, { code: view.error_type, message: view.error_message });
        } catch {
          // shown without its message
        }
      }),
    );
  }

  // A run may end before the page follows it (a fast run finishes between its submit
  // and the history read): the panels hear of it all the same, as if it was streamed.
  let endedRuns = null; // ids of the runs seen ended; null before the first load
  function noticeEndedRuns(runs) {
    const ended = runs.filter((run) => !ACTIVE.has(run.status)).map((run) => run.run_id);
    const fresh = endedRuns ? ended.filter((id) => !endedRuns.has(id)) : [];
    endedRuns = new Set(ended);
    if (!fresh.length) return;
    for (const id of fresh) ctx.emit("run-ended", id);
    ctx.emit("queue-changed");
    ctx.emit("files-changed");
  }

  async function load() {
    const seq = ++loadSeq;
    let history;
    try {
      history = await api("GET", `/api/chat/thread/${threadId}/history`);
    } catch (error) {
      if (disposed || seq !== loadSeq) return;
      if (error instanceof ApiError && error.status === 404) {
        fill(
          main,
          h("section", { class: "not-found", role: "alert" }, h("h2", {}, t("thread.notFound")), h("p", {}, t("thread.notFoundBody"))),
        );
        return;
      }
      alert.textContent = errorText(error);
      return;
    }
    await fetchRunErrors(history.runs);
    if (disposed || seq !== loadSeq) return;
    ctx.thread = history.thread;
    ctx.history = history;
    renderHeader(history.thread);
    renderHistory(history);
    noticeEndedRuns(history.runs);
    ctx.emit("thread-loaded", history);
    const latest = latestTopLevelRun(history.runs);
    try {
      const viewed = await api("POST", `/api/chat/thread/${threadId}/viewed`);
      if (!disposed && seq === loadSeq) {
        ctx.thread = viewed;
        renderHeader(viewed);
      }
      ctx.emit("threads-changed");
    } catch {
      // viewed is best effort
    }
    await loadInterrupt(latest);
    if (latest && ACTIVE.has(latest.status) && (!stream || stream.runId !== latest.run_id)) {
      follow(latest.run_id);
    }
    messages.scrollTop = messages.scrollHeight;
  }

  // -- the live run -----------------------------------------------------------------
  function follow(runId) {
    if (stream) stream.controller.abort();
    const controller = new AbortController();
    stream = { runId, controller };
    const texts = new Map();
    const body = h("div", { class: "text markdown" });
    const tools = h("div", { class: "live-tools" });
    const status = h("div", { class: "live-status", role: "status" }, t("run.running"));
    const liveMessage = h("article", { class: "msg assistant streaming", dataset: { runId } }, h("div", { class: "who" }, t("role.assistant")), body, tools);
    fill(live, liveMessage, status);
    live.hidden = false;
    cancel.hidden = false;
    if (!messages.contains(live)) messages.append(live);
    let frame = 0;
    const paint = () => {
      frame = 0;
      fill(body, renderMarkdown([...texts.values()].join("\n\n")));
      messages.scrollTop = messages.scrollHeight;
    };
    const onEvent = ({ event, data }) => {
      if (event === "messages") {
        for (const chunk of data.chunks || []) {
          texts.set(chunk.message_id, (texts.get(chunk.message_id) || "") + chunk.text);
        }
        if (!frame) frame = requestAnimationFrame(paint);
      } else if (event === "tool") {
        if (data.type === "call") tools.append(...(data.calls || []).map(toolCall));
        else tools.append(toolResult(data.name, data.status, data.content));
      } else if (event === "metadata") {
        fill(status, t("run.runningWith", { model: data.model }));
      } else if (event === "error") {
        status.append(h("span", { class: "run-error" }, ` ${errorText(data)}`));
      } else if (event === "interrupt") {
        fill(status, t("run.interrupted"));
      } else if (event === "end") {
        fill(status, t(`run.${data.status}`));
      }
    };
    streamRun(runId, {
      onEvent,
      signal: controller.signal,
      onReconnect: () => fill(status, t("run.reconnecting")),
    })
      .catch((error) => {
        if (!controller.signal.aborted) alert.textContent = errorText(error);
      })
      .finally(() => {
        if (controller.signal.aborted || disposed) return;
        stream = null;
        cancel.hidden = true;
        live.hidden = true;
        fill(live);
        if (endedRuns) endedRuns.add(runId);
        ctx.emit("run-ended", runId);
        ctx.emit("queue-changed");
        ctx.emit("files-changed");
        load();
      });
  }

  // -- interrupts -----------------------------------------------------------------
  async function loadInterrupt(latest) {
    if (!latest || latest.status !== "interrupted") {
      interrupt.hidden = true;
      fill(interrupt);
      return;
    }
    let state;
    try {
      state = await api("GET", `/api/chat/thread/${threadId}/state`);
    } catch (error) {
      alert.textContent = errorText(error);
      return;
    }
    if (!state.interrupt) {
      interrupt.hidden = true;
      return;
    }
    renderInterrupt(latest.run_id, state.interrupt.value || {});
  }

  async function resume(runId, value) {
    alert.textContent = "";
    try {
      await api("POST", `/api/agent/runs/${runId}/resume`, { resume: value, request_id: crypto.randomUUID() });
      interrupt.hidden = true;
      fill(interrupt);
      await load();
    } catch (error) {
      alert.textContent = errorText(error);
    }
  }

  function renderInterrupt(runId, value) {
    interrupt.hidden = false;
    if (value.type === "question") {
      const answer = h("input", { name: "answer", autocomplete: "off" });
      const form = h(
        "form",
        { class: "question" },
        h("h3", {}, t("interrupt.question")),
        h("p", { class: "question-text" }, value.question),
        field(t("interrupt.answer"), answer),
        h("button", { type: "submit", class: "primary" }, t("interrupt.send")),
      );
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        resume(runId, answer.value);
      });
      fill(interrupt, form);
      answer.focus();
      return;
    }
    const requests = value.action_requests || [];
    const reason = h("input", { name: "reason", autocomplete: "off" });
    fill(
      interrupt,
      h("h3", {}, t("interrupt.approval")),
      requests.map((request) =>
        h(
          "div",
          { class: "approval-request" },
          h("p", {}, t("interrupt.wantsToCall", { name: request.name })),
          h("pre", {}, json(request.args)),
          request.description ? h("p", { class: "hint" }, request.description) : null,
        ),
      ),
      field(t("interrupt.reason"), reason),
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "button", class: "primary", onclick: () => resume(runId, { decision: "approve" }) }, t("interrupt.approve")),
        h(
          "button",
          {
            type: "button",
            onclick: () => resume(runId, reason.value ? { decision: "reject", message: reason.value } : { decision: "reject" }),
          },
          t("interrupt.reject"),
        ),
      ),
    );
  }

  const off = [ctx.on("thread-reload", () => load())];
  load();
  setTimeout(() => input.focus(), 0);
  return () => {
    disposed = true;
    if (stream) stream.controller.abort();
    for (const fn of off) fn();
  };
}
