// Token usage per UTC day and model (GET /api/usage): the caller's, or for admins
// everyone's. A thread's usage is in the Run panel.

import { api } from "../api.js";
import { field, fill, h, uid } from "../dom.js";
import { t } from "../i18n.js";

// in and out (their sum is the footer's); a 22rem panel has no room for more
const COLUMNS = ["runs", "input_tokens", "output_tokens"];

/** A cost in the unit of the models' prices (they name no currency); — when unpriced. */
export function formatCost(cost) {
  return cost === null || cost === undefined ? "—" : Number(cost).toFixed(4);
}

/** A table of usage rows: {day?, uid?, model, runs?, tokens…, cost}. */
export function usageTable(rows, { day = false, user = null, runs = true } = {}) {
  const columns = COLUMNS.filter((c) => runs || c !== "runs");
  const head = [day ? "day" : null, user ? "user" : null, "model", ...columns, "cost"].filter(Boolean);
  const totals = Object.fromEntries(columns.map((c) => [c, 0]));
  let cost = null;
  for (const row of rows) {
    for (const c of columns) totals[c] += row[c] || 0;
    if (row.cost !== null && row.cost !== undefined) cost = (cost || 0) + Number(row.cost);
  }
  const cell = (value, numeric) => h("td", { class: numeric ? "num" : null }, value);
  return h(
    "div",
    { class: "table-scroll" },
    h(
      "table",
      { class: "usage-table" },
      h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, t(`usage.col.${c}`))))),
      h(
        "tbody",
        {},
        rows.map((row) =>
          h(
            "tr",
            { dataset: { model: row.model } },
            // MM-DD fits the panel; the whole date is the element's datetime and title
            day ? cell(h("time", { datetime: row.day, title: row.day }, row.day.slice(5))) : null,
            user ? cell(user(row.uid)) : null,
            cell(row.model),
            columns.map((c) => cell((row[c] || 0).toLocaleString(), true)),
            cell(formatCost(row.cost), true),
          ),
        ),
      ),
      rows.length > 1
        ? h(
            "tfoot",
            {},
            h(
              "tr",
              {},
              h("th", { scope: "row", colspan: String(head.length - columns.length - 1) }, t("usage.total")),
              columns.map((c) => cell(totals[c].toLocaleString(), true)),
              cell(formatCost(cost), true),
            ),
          )
        : null,
    ),
  );
}

export default {
  id: "usage",
  label: "panel.usage",
  requires: ["/api/usage"],
  needsThread: false,
  mount(ctx, host) {
    const days = h(
      "select",
      { name: "days" },
      [1, 7, 30, 90].map((n) => h("option", { value: String(n), selected: n === 30 }, t("usage.days", { n }))),
    );
    const everyone = h("input", { type: "checkbox", name: "all", id: uid() });
    const body = h("div", { class: "usage", "aria-live": "polite" });
    fill(
      host,
      h("h2", {}, t("panel.usage")),
      h("form", { class: "usage-form" },
        field(t("usage.period"), days),
        ctx.me.is_admin ? h("span", { class: "checkbox" }, everyone, h("label", { for: everyone.id }, t("usage.everyone"))) : null,
      ),
      body,
    );
    let disposed = false;
    let drawn = 0;
    let names = null; // uid → name, for admins

    async function refresh() {
      const mine = ++drawn;
      const since = new Date(Date.now() - Number(days.value) * 86_400_000).toISOString();
      const query = new URLSearchParams({ since });
      if (everyone.checked) query.set("all", "true");
      try {
        if (everyone.checked && !names && ctx.has("/api/users")) {
          names = new Map((await api("GET", "/api/users")).map((u) => [u.id, u.name]));
        }
        const report = await api("GET", `/api/usage?${query}`);
        if (disposed || mine !== drawn) return;
        fill(
          body,
          report.usage.length
            ? usageTable(report.usage, {
                day: true,
                user: everyone.checked ? (id) => (names && names.get(id)) || id.slice(0, 8) : null,
              })
            : h("p", { class: "empty" }, t("usage.none")),
          h("p", { class: "hint" }, t("usage.hint")),
        );
      } catch (e) {
        if (!disposed && mine === drawn) fill(body, h("p", { class: "error", role: "alert" }, `${e.code}: ${e.message}`));
      }
    }
    days.addEventListener("change", refresh);
    everyone.addEventListener("change", refresh);
    refresh();
    const off = [ctx.on("run-ended", refresh)];
    return () => {
      disposed = true;
      off.forEach((fn) => fn());
    };
  },
};
