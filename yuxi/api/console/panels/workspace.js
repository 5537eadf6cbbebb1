// The user's workspace prompt files: agents/AGENTS.md and agents/USER.md (appended to
// every run's system prompt) and agents/MEMORY.md (read when memory is enabled).

import { ApiError, api } from "../api.js";
import { field, fill, h } from "../dom.js";
import { t } from "../i18n.js";

const NAMES = ["agents/AGENTS.md", "agents/USER.md", "agents/MEMORY.md"];

export default {
  id: "workspace",
  label: "panel.workspace",
  requires: ["/api/workspace/files/{name}"],
  needsThread: false,
  mount(_ctx, host) {
    const picker = h("select", { name: "file" }, NAMES.map((name) => h("option", { value: name }, name)));
    const text = h("textarea", { name: "content", rows: "16", class: "mono" });
    const status = h("p", { role: "status", class: "notice" });
    const form = h(
      "form",
      { class: "workspace-form" },
      field(t("workspace.file"), picker, t("workspace.hint")),
      field(t("workspace.content"), text),
      h("button", { type: "submit", class: "primary" }, t("common.save")),
      status,
    );
    fill(host, h("h2", {}, t("panel.workspace")), form);

    async function load() {
      status.textContent = "";
      try {
        const response = await api("GET", `/api/workspace/files/${picker.value}`, undefined, { raw: true });
        text.value = await response.text();
      } catch (e) {
        text.value = "";
        if (!(e instanceof ApiError && e.status === 404)) status.textContent = `${e.code}: ${e.message}`;
      }
    }
    picker.addEventListener("change", load);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api("PUT", `/api/workspace/files/${picker.value}`, new Blob([text.value], { type: "text/markdown" }));
        status.textContent = t("workspace.saved");
      } catch (e) {
        status.textContent = `${e.code}: ${e.message}`;
      }
    });
    load();
  },
};
