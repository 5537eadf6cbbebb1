// Knowledge bases: the caller's own and those shared with them; create (name,
// description, share scope), upload documents (multipart, one `file` part each), watch
// their ingestion (queued → processing → ready, or failed with its error), search,
// delete. A shared knowledge base is read-only: it can be searched, not changed.

import { api } from "../api.js";
import { confirmButton, field, fill, formatBytes, h } from "../dom.js";
import { t } from "../i18n.js";

const BUSY = new Set(["queued", "processing"]);
const POLL_MS = 1000;

export default {
  id: "knowledge",
  label: "panel.knowledge",
  requires: [
    "/api/knowledge-bases",
    "/api/knowledge-bases/{kb_id}",
    "/api/knowledge-bases/{kb_id}/documents",
    "/api/knowledge-bases/{kb_id}/documents/{document_id}",
    "/api/knowledge-bases/{kb_id}/search",
  ],
  needsThread: false,
  mount(ctx, host) {
    const me = ctx.me; // as signed in at mount: a 401 meanwhile signs out (ctx.me null)
    const error = h("p", { class: "error", role: "alert" });
    const list = h("ul", { class: "kb-list" });
    const detail = h("section", { class: "kb-detail", hidden: true });
    const name = h("input", { name: "name", required: true, autocomplete: "off", maxlength: "200" });
    const description = h("textarea", { name: "description", rows: "2" });
    const scope = h(
      "select",
      { name: "share_scope" },
      ["owner", "all", "selected"].map((s) => h("option", { value: s }, t(`kb.scope.${s}`))),
    );
    const sharedWith = h("input", { name: "shared_with", autocomplete: "off", class: "mono" });
    const sharedField = field(t("kb.sharedWith"), sharedWith, t("kb.sharedWithHint"));
    sharedField.hidden = true;
    scope.addEventListener("change", () => {
      sharedField.hidden = scope.value !== "selected";
    });
    const form = h(
      "form",
      { class: "kb-form" },
      h("h3", {}, t("kb.new")),
      field(t("kb.name"), name),
      field(t("kb.description"), description),
      field(t("kb.scope"), scope),
      sharedField,
      h("button", { type: "submit", class: "primary" }, t("kb.create")),
    );
    fill(host, h("h2", {}, t("panel.knowledge")), error, list, detail, form);

    let disposed = false;
    let selected = null; // a knowledge base id
    let timer = null;
    let drawn = 0; // only the newest answer is drawn
    const report = (e) => {
      error.textContent = `${e.code}: ${e.message}`;
    };

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.textContent = "";
      const body = { name: name.value.trim(), description: description.value, share_scope: scope.value };
      if (scope.value === "selected") {
        body.shared_with = sharedWith.value.split(/[\s,]+/).filter(Boolean);
      }
      try {
        const kb = await api("POST", "/api/knowledge-bases", body);
        name.value = "";
        description.value = "";
        selected = kb.id;
        await refresh();
      } catch (e) {
        report(e);
      }
    });

    function kbItem(kb) {
      const mine = kb.uid === me.id;
      return h(
        "li",
        { class: kb.id === selected ? "current" : null, dataset: { kbId: kb.id } },
        h(
          "button",
          { type: "button", class: "link", "aria-pressed": String(kb.id === selected), onclick: () => select(kb.id) },
          kb.name,
        ),
        h("span", { class: "badge" }, t(`kb.scope.${kb.share_scope}`)),
        mine ? null : h("span", { class: "badge" }, t("kb.sharedBy", { name: kb.owner_name || "?" })),
        h("small", { class: "kb-counts" }, ` ${t("kb.counts", { ready: kb.ready_documents, documents: kb.documents, chunks: kb.chunks })}`),
        kb.description ? h("p", { class: "hint" }, kb.description) : null,
      );
    }

    async function refresh() {
      const mine = ++drawn;
      clearTimeout(timer);
      let kbs;
      let docs = null;
      try {
        // the documents first, then the list: its counts are never older than they are
        if (selected) {
          try {
            docs = await api("GET", `/api/knowledge-bases/${selected}/documents`);
          } catch (e) {
            if (e.status !== 404) throw e;
            selected = null; // deleted meanwhile
          }
        }
        kbs = await api("GET", "/api/knowledge-bases");
      } catch (e) {
        report(e);
        return;
      }
      if (disposed || mine !== drawn) return;
      if (selected && !kbs.some((kb) => kb.id === selected)) selected = null;
      fill(list, kbs.length ? kbs.map(kbItem) : h("li", { class: "empty" }, t("kb.none")));
      const kb = kbs.find((k) => k.id === selected);
      if (kb && docs) showDetail(kb, docs);
      else {
        detail.hidden = true;
        detailFor = null;
        fill(detail);
      }
      // watch the ingestion while a document is queued or processing
      if (docs && docs.some((doc) => BUSY.has(doc.status))) timer = setTimeout(refresh, POLL_MS);
    }

    function select(id) {
      selected = id;
      refresh();
    }

    function documentItem(kb, doc, writable) {
      return h(
        "li",
        { class: `kb-doc kb-doc-${doc.status}`, dataset: { documentId: doc.id, status: doc.status } },
        h("span", { class: "kb-doc-name" }, doc.filename),
        h("span", { class: `badge kb-status kb-status-${doc.status}` }, t(`kb.status.${doc.status}`)),
        h("small", {}, ` ${formatBytes(doc.bytes)}`, doc.status === "ready" ? ` · ${t("kb.chunks", { n: doc.chunks })}` : ""),
        doc.error ? h("p", { class: "run-error kb-doc-error" }, doc.error) : null,
        writable
          ? confirmButton(t("kb.removeDoc"), t("kb.removeDocConfirm"), async () => {
              try {
                await api("DELETE", `/api/knowledge-bases/${kb.id}/documents/${doc.id}`);
              } catch (e) {
                report(e);
              }
              refresh();
            })
          : null,
      );
    }

    // the detail is built once per knowledge base; its document list is redrawn
    let detailFor = null;
    let documents = null;
    let shownDocs = [];
    function showDetail(kb, docs) {
      const writable = kb.uid === me.id;
      if (detailFor !== kb.id || !detail.firstChild) {
        detailFor = kb.id;
        documents = h("ul", { class: "kb-docs" });
        detail.hidden = false;
        fill(
          detail,
          h("h3", {}, kb.name),
          writable ? uploadField(kb) : h("p", { class: "hint" }, t("kb.readOnly")),
          h("h4", {}, t("kb.documents")),
          documents,
          searchForm(kb),
          writable
            ? h(
                "div",
                { class: "buttons" },
                confirmButton(t("kb.delete"), t("kb.deleteConfirm"), async () => {
                  try {
                    await api("DELETE", `/api/knowledge-bases/${kb.id}`);
                    selected = null;
                  } catch (e) {
                    report(e);
                  }
                  refresh();
                }),
              )
            : null,
        );
      }
      shownDocs = docs;
      fill(documents, docs.length ? docs.map((doc) => documentItem(kb, doc, writable)) : h("li", { class: "empty" }, t("kb.noDocuments")));
    }

    function uploadField(kb) {
      const input = h("input", { type: "file", multiple: true, name: "file" });
      input.addEventListener("change", async () => {
        if (!input.files.length) return;
        error.textContent = "";
        const body = new FormData();
        for (const file of input.files) body.append("file", file);
        try {
          // the documents as the upload answers (queued) at once, then as they progress
          const added = await api("POST", `/api/knowledge-bases/${kb.id}/documents`, body);
          if (!disposed && detailFor === kb.id) {
            const ids = new Set(added.map((doc) => doc.id));
            showDetail(kb, [...shownDocs.filter((doc) => !ids.has(doc.id)), ...added]);
          }
        } catch (e) {
          report(e);
        }
        input.value = "";
        refresh();
      });
      return field(t("kb.upload"), input, t("kb.uploadHint"));
    }

    function searchForm(kb) {
      const query = h("input", { type: "search", name: "query", autocomplete: "off", required: true });
      const results = h("ol", { class: "kb-results", "aria-live": "polite" });
      const searchForm = h(
        "form",
        { class: "kb-search", role: "search" },
        h("h4", {}, t("kb.search")),
        field(t("kb.query"), query),
        h("button", { type: "submit" }, t("kb.searchButton")),
        results,
      );
      searchForm.addEventListener("submit", async (event) => {
        event.preventDefault();
        fill(results, h("li", { class: "empty" }, t("common.loading")));
        try {
          const found = await api("POST", `/api/knowledge-bases/${kb.id}/search`, { query: query.value, k: 10 });
          fill(
            results,
            found.results.length
              ? found.results.map((hit) =>
                  h(
                    "li",
                    { class: "kb-hit" },
                    h(
                      "p",
                      { class: "kb-hit-meta" },
                      h("strong", {}, hit.filename),
                      ` · ${t("kb.chunk", { n: hit.chunk })} · ${t("kb.score", { score: hit.score.toFixed(4) })}`,
                    ),
                    h("p", { class: "kb-hit-text" }, hit.text),
                  ),
                )
              : h("li", { class: "empty" }, t("kb.noResults")),
          );
        } catch (e) {
          fill(results);
          report(e);
        }
      });
      return searchForm;
    }

    refresh();
    return () => {
      disposed = true;
      clearTimeout(timer);
    };
  },
};
