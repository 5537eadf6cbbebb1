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
    const save = h("button", { type: "submit", class: "primary" }, t("common.save"));
    const form = h(
      "form",
      { class: "workspace-form" },
      field(t("workspace.file"), picker, t("workspace.hint")),
      field(t("workspace.content"), text),
      save,
      status,
    );
    fill(host, h("h2", {}, t("panel.workspace")), form);

    // read-only while a file loads, so nothing typed meanwhile is overwritten (or saved
    // over the file as the empty box it was)
    let loading = 0;
    async function load() {
      const mine = ++loading;
      status.textContent = "";
      text.readOnly = true;
      save.disabled = true;
      let value = "";
      try {
        const response = await api("GET", `/api/workspace/files/${picker.value}`, undefined, { raw: true });
        value = await response.text();
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) {
          // unread: not offered for editing, so an empty box never replaces it
          if (mine === loading) status.textContent = `${e.code}: ${e.message}`;
          return;
        }
      }
      if (mine !== loading) return;
      text.value = value;
      text.readOnly = false;
      save.disabled = false;
    }
    picker.addEventListener("change", load);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (text.readOnly) return;
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
