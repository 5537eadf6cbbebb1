// The agent's configuration form, generated from the agent's `configurable_items`: one
// control per item, chosen by its `kind` (then its `options`, then its `type`), so a
// field added to a Context class appears here with no console change. Values come from
// the stored `config.context`, defaults from the items; admins save it back with
// PATCH /api/agents/{slug} (name, sharing and retries untouched).
//
// Resource kinds follow the three-way rule: unset = everything the user may use, a list
// = those, [] = none. For `agents` (subagents) an empty list also means all, so that
// kind has two choices.

import { api } from "../api.js";
import { field, fill, h, uid } from "../dom.js";
import { t } from "../i18n.js";

const RESOURCE_KINDS = new Set(["tools", "knowledges", "mcps", "skills", "agents"]);

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** One control for an item: {node, read() → value | undefined (= leave unset)}. */
export function controlFor(item, stored, hasStored, models = []) {
  const value = hasStored ? stored : item.default;
  const label = item.name || item.key;
  const hint = item.description || null;
  if (RESOURCE_KINDS.has(item.kind)) return resourceControl(item, hasStored ? stored : undefined, label, hint);
  if (item.kind === "prompt") {
    const el = h("textarea", { name: item.key, rows: "5", value: value ?? "" });
    return { node: field(label, el, hint), read: () => el.value };
  }
  if (item.kind === "bool" || item.type === "bool") {
    const el = h("input", { type: "checkbox", name: item.key, checked: Boolean(value) });
    const id = uid();
    el.id = id;
    return {
      node: h("div", { class: "field checkbox" }, el, h("label", { for: id }, label), hint ? h("small", { class: "hint" }, hint) : null),
      read: () => el.checked,
    };
  }
  if (item.kind === "number" || item.type === "int" || item.type === "float") {
    const el = h("input", { type: "number", name: item.key, value: value ?? "", step: item.type === "float" ? "any" : "1" });
    return {
      node: field(label, el, hint),
      read: () => (el.value === "" ? undefined : item.type === "float" ? Number.parseFloat(el.value) : Number.parseInt(el.value, 10)),
    };
  }
  if (Array.isArray(item.options) && item.options.length && item.type !== "list") {
    const options = item.options.includes(value) || value === null || value === undefined ? item.options : [value, ...item.options];
    const el = h("select", { name: item.key }, options.map((o) => h("option", { value: o, selected: o === value }, o)));
    return { node: field(label, el, hint), read: () => el.value };
  }
  if (item.kind === "llm") {
    const listId = uid("models");
    // the registry's models first (GET /api/models: those the user may pick), then the
    // item's own options; the field stays free text for a model of the environment
    const named = new Map(models.filter((m) => m.enabled).map((m) => [m.spec, m.owner === "user" ? `${m.name} (${t("models.owner.user")})` : m.name]));
    const choices = new Set([...named.keys(), ...(item.options || []), "builtin:scripted", value].filter(Boolean));
    const el = h("input", { name: item.key, value: value ?? "", list: listId, autocomplete: "off", placeholder: "provider:model" });
    return {
      node: [field(label, el, hint), h("datalist", { id: listId }, [...choices].map((c) => h("option", { value: c, label: named.get(c) || null })))],
      read: () => el.value.trim(),
    };
  }
  if (item.type === "list" || item.type === "dict" || (value !== null && typeof value === "object")) {
    const el = h("textarea", { name: item.key, rows: "3", class: "mono", value: value === undefined ? "" : JSON.stringify(value) });
    return {
      node: field(label, el, `${hint || ""} (JSON)`),
      read: () => (el.value.trim() === "" ? undefined : JSON.parse(el.value)),
    };
  }
  const el = h("input", { name: item.key, value: value ?? "", autocomplete: "off" });
  return { node: field(label, el, hint), read: () => el.value };
}

function resourceControl(item, stored, label, hint) {
  const twoWay = item.kind === "agents";
  // a plain list of ids (its default is a list, e.g. preload_skills, required_mcps):
  // none or these, never "all"
  const plainList = Array.isArray(item.default);
  const options = item.options || [];
  const group = uid("res");
  let mode = stored === undefined || stored === null ? "all" : stored.length === 0 ? (twoWay ? "all" : "none") : "list";
  if (plainList && mode === "all") mode = "none";
  const chosen = new Set(Array.isArray(stored) ? stored : []);
  const boxes = options.map((option) => {
    const box = h("input", { type: "checkbox", value: option, checked: chosen.has(option) });
    box.id = uid();
    return h("li", {}, box, h("label", { for: box.id }, option));
  });
  const list = h("ul", { class: "choices" }, boxes.length ? boxes : h("li", { class: "empty" }, t("config.noOptions")));
  const modes = twoWay ? ["all", "list"] : plainList ? ["none", "list"] : ["all", "list", "none"];
  const radios = modes.map((m) => {
    const radio = h("input", { type: "radio", name: group, value: m, checked: mode === m });
    radio.id = uid();
    radio.addEventListener("change", () => {
      mode = m;
      list.hidden = mode !== "list";
    });
    return h("span", { class: "radio" }, radio, h("label", { for: radio.id }, t(`config.mode.${m}`)));
  });
  list.hidden = mode !== "list";
  const node = h(
    "fieldset",
    { class: "resource", dataset: { key: item.key, kind: item.kind } },
    h("legend", {}, label),
    hint ? h("small", { class: "hint" }, hint) : null,
    h("div", { class: "modes" }, radios),
    list,
  );
  return {
    node,
    read: () => {
      if (mode === "all") return undefined;
      if (mode === "none") return [];
      return [...list.querySelectorAll("input:checked")].map((box) => box.value);
    },
  };
}

export default {
  id: "config",
  label: "panel.config",
  requires: ["/api/agents/{slug}"],
  needsThread: false,
  mount(ctx, host) {
    const me = ctx.me; // as signed in at mount: a 401 meanwhile signs out (ctx.me null)
    const picker = h("select", { name: "agent" });
    const body = h("div", { class: "config" });
    fill(host, h("h2", {}, t("panel.config")), field(t("config.agent"), picker), body);

    let showing = 0;
    async function show(slug) {
      const mine = ++showing; // only the last agent asked for is drawn
      fill(body, h("p", {}, t("common.loading")));
      let agent;
      try {
        agent = await api("GET", `/api/agents/${encodeURIComponent(slug)}`);
      } catch (e) {
        if (mine === showing) fill(body, h("p", { class: "error", role: "alert" }, `${e.code}: ${e.message}`));
        return;
      }
      if (mine !== showing) return;
      const context = (agent.config && agent.config.context) || {};
      let models = [];
      if (ctx.has("/api/models") && agent.configurable_items.some((item) => item.kind === "llm")) {
        try {
          models = await api("GET", "/api/models");
        } catch {
          // the picker still offers the item's own options
        }
        if (mine !== showing) return;
      }
      const controls = agent.configurable_items.map((item) => ({
        item,
        control: controlFor(item, context[item.key], Object.hasOwn(context, item.key), models),
      }));
      const status = h("p", { role: "status", class: "notice" });
      const canSave = me.is_admin && ctx.has("/api/agents/{slug}");
      const fieldset = h("fieldset", { disabled: !canSave }, h("legend", { class: "sr-only" }, agent.name), controls.map((c) => c.control.node));
      const form = h(
        "form",
        { class: "config-form", dataset: { agent: agent.id } },
        h("p", { class: "hint" }, agent.description),
        fieldset,
        canSave ? h("button", { type: "submit", class: "primary" }, t("common.save")) : h("p", { class: "hint" }, t("config.adminsOnly")),
        status,
      );
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        status.textContent = "";
        // keep what was stored, and whatever now differs from its default
        const next = {};
        try {
          for (const { item, control } of controls) {
            const value = control.read();
            if (value === undefined) continue;
            if (Object.hasOwn(context, item.key) || !same(value, item.default)) next[item.key] = value;
          }
        } catch (e) {
          status.textContent = `${t("config.invalid")}: ${e.message}`;
          return;
        }
        try {
          await api("PATCH", `/api/agents/${encodeURIComponent(agent.id)}`, { config: { ...agent.config, context: next } });
          status.textContent = t("config.saved");
        } catch (e) {
          status.textContent = `${e.code}: ${e.message}`;
        }
      });
      fill(body, form);
    }

    (async () => {
      let agents = [];
      try {
        agents = await api("GET", "/api/agents");
      } catch (e) {
        fill(body, h("p", { class: "error" }, `${e.code}: ${e.message}`));
        return;
      }
      const current = (ctx.thread && ctx.thread.agent_id) || (agents[0] && agents[0].id);
      fill(picker, agents.map((a) => h("option", { value: a.id, selected: a.id === current }, `${a.name} (${a.id})`)));
      if (current) show(current);
    })();
    picker.addEventListener("change", () => show(picker.value));
    const off = [

      ctx.on("thread-loaded", (history) => {
        if (history.thread.agent_id !== picker.value && picker.querySelector(`option[value="${CSS.escape(history.thread.agent_id)}"]`)) {
          picker.value = history.thread.agent_id;
          show(picker.value);
        }
      }),
    ];
    return () => off.forEach((fn) => fn());
  },
};
