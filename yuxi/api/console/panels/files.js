// The thread's files: attachments (upload, remove), the workdir browser with a viewer,
// and the artifacts the agent wrote under outputs/. Every path is relative to the
// conversation's workdir; the server never shows a host path.

import { api } from "../api.js";
import { confirmButton, field, fill, formatBytes, formatTime, h } from "../dom.js";
import { t } from "../i18n.js";

const TEXT_TYPES = /^(text\/|application\/(json|xml|javascript|x-yaml|yaml|toml|x-sh))/;

export default {
  id: "files",
  label: "panel.files",
  requires: [
    "/api/chat/thread/{thread_id}/attachments",
    "/api/chat/thread/{thread_id}/files",
    "/api/chat/thread/{thread_id}/files/content",
    "/api/chat/thread/{thread_id}/artifacts",
  ],
  needsThread: true,
  mount(ctx, host) {
    const base = `/api/chat/thread/${ctx.threadId}`;
    const error = h("p", { class: "error", role: "alert" });
    const upload = h("input", { type: "file", multiple: true, name: "file" });
    const attachments = h("ul", { class: "file-list attachments" });
    const crumbs = h("nav", { class: "crumbs", "aria-label": t("files.path") });
    const entries = h("ul", { class: "file-list entries" });
    const artifacts = h("ul", { class: "file-list artifacts" });
    const viewer = h("section", { class: "viewer", "aria-label": t("files.viewer"), hidden: true });
    let path = "";
    const blobUrls = [];

    fill(
      host,
      h("h2", {}, t("panel.files")),
      error,
      h("h3", {}, t("files.attachments")),
      field(t("files.upload"), upload),
      attachments,
      h("h3", {}, t("files.workdir")),
      crumbs,
      entries,
      h("h3", {}, t("files.artifacts")),
      artifacts,
      viewer,
    );

    const report = (e) => {
      error.textContent = `${e.code}: ${e.message}`;
    };

    upload.addEventListener("change", async () => {
      if (!upload.files.length) return;
      const form = new FormData();
      for (const file of upload.files) form.append("file", file);
      try {
        await api("POST", `${base}/attachments`, form);
      } catch (e) {
        report(e);
      }
      upload.value = "";
      refresh();
    });

    async function open(entryPath, mediaType) {
      viewer.hidden = false;
      fill(viewer, h("p", {}, t("common.loading")));
      try {
        const query = new URLSearchParams({ path: entryPath });
        const response = await api("GET", `${base}/files/content?${query}`, undefined, { raw: true });
        const type = (response.headers.get("content-type") || mediaType || "").split(";")[0];
        const blob = await response.blob();
        const url = URL.createObjectURL(blob);
        blobUrls.push(url);
        const name = entryPath.split("/").pop();
        let body;
        if (TEXT_TYPES.test(type) || type === "") body = h("pre", { class: "file-text" }, await blob.text());
        else if (type.startsWith("image/") && type !== "image/svg+xml") body = h("img", { src: url, alt: name });
        else body = h("p", {}, t("files.binary", { type }));
        fill(
          viewer,
          h("h3", {}, entryPath),
          h("p", {}, h("a", { href: url, download: name }, t("files.download")), " ", h("button", { type: "button", onclick: () => { viewer.hidden = true; } }, t("common.close"))),
          body,
        );
      } catch (e) {
        fill(viewer, h("p", { class: "error" }, `${e.code}: ${e.message}`));
      }
    }

    function entryItem(entry) {
      const info = entry.kind === "file" ? `${formatBytes(entry.bytes)} · ${formatTime(entry.modified)}` : t(`files.kind.${entry.kind}`);
      const button =
        entry.kind === "directory"
          ? h("button", { type: "button", class: "link", onclick: () => browse(entry.path) }, `${entry.name}/`)
          : entry.kind === "file"
            ? h("button", { type: "button", class: "link", onclick: () => open(entry.path, entry.media_type) }, entry.name)
            : h("span", {}, entry.name);
      return h("li", { dataset: { path: entry.path } }, button, h("small", {}, ` ${info}`));
    }

    let browsed = 0;
    async function browse(next) {
      const mine = ++browsed;
      path = next;
      const parts = path ? path.split("/") : [];
      fill(
        crumbs,
        h("button", { type: "button", class: "link", onclick: () => browse("") }, t("files.root")),
        parts.map((part, index) => [" / ", h("button", { type: "button", class: "link", onclick: () => browse(parts.slice(0, index + 1).join("/")) }, part)]),
      );
      try {
        const query = path ? `?${new URLSearchParams({ path })}` : "";
        const listing = await api("GET", `${base}/files${query}`);
        if (mine !== browsed) return;
        fill(
          entries,
          listing.entries.length ? listing.entries.map(entryItem) : h("li", { class: "empty" }, t("files.emptyDir")),
          listing.truncated ? h("li", { class: "hint" }, t("files.truncated")) : null,
        );
      } catch (e) {
        if (mine !== browsed) return;
        if (path) return browse("");
        report(e);
      }
    }

    let refreshed = 0; // only the newest answer is drawn (two refreshes may cross)
    async function refresh() {
      const mine = ++refreshed;
      try {
        const [rows, art] = await Promise.all([api("GET", `${base}/attachments`), api("GET", `${base}/artifacts`)]);
        if (mine !== refreshed) return;
        fill(
          attachments,
          rows.length
            ? rows.map((row) =>
                h(
                  "li",
                  { dataset: { attachmentId: row.id } },
                  h("button", { type: "button", class: "link", onclick: () => open(row.path, row.media_type) }, row.filename),
                  h("small", {}, ` ${formatBytes(row.bytes)} · ${row.media_type}`),
                  " ",
                  confirmButton(t("files.remove"), t("files.removeConfirm"), async () => {
                    try {
                      await api("DELETE", `${base}/attachments/${row.id}`);
                    } catch (e) {
                      report(e);
                    }
                    refresh();
                  }),
                ),
              )
            : h("li", { class: "empty" }, t("files.noAttachments")),
        );
        fill(
          artifacts,
          art.artifacts.length ? art.artifacts.map(entryItem) : h("li", { class: "empty" }, t("files.noArtifacts")),
        );
      } catch (e) {
        report(e);
      }
      browse(path);
    }

    refresh();
    const off = [ctx.on("files-changed", refresh)];
    return () => {
      off.forEach((fn) => fn());
      blobUrls.forEach((url) => URL.revokeObjectURL(url));
    };
  },
};
