// Models: those the caller may pick (GET /api/models), their own models with their own
// keys (BYOK, /api/me/models), and for admins the platform models (/api/models). A key
// is write-only: it is sent once and only `has_key` and its last four characters
// (`api_key_hint`) ever come back.

import { api } from "../api.js";
import { confirmButton, field, fill, h, uid } from "../dom.js";
import { t } from "../i18n.js";

const CAPABILITIES = [
  ["streaming", true],
  ["function_calling", true],
  ["vision", false],
  ["json_mode", false],
];

function keyText(model) {
  if (!model.has_key) return t("models.noKey");
  return model.api_key_hint ? t("models.keyHint", { hint: model.api_key_hint }) : t("models.hasKey");
}

function modelFacts(model) {
  const caps = CAPABILITIES.filter(([name]) => model.capabilities && model.capabilities[name]).map(([name]) => t(`models.cap.${name}`));
  return [
    h("span", { class: "mono" }, model.spec),
    h("span", { class: "badge" }, t(`models.owner.${model.owner}`)),
    model.enabled ? null : h("span", { class: "badge run-status-cancelled" }, t("models.disabled")),
    h(
      "small",
      { class: "model-facts" },
      [
        model.base_url,
        keyText(model),
        model.context_window ? t("models.window", { n: model.context_window.toLocaleString() }) : null,
        caps.length ? caps.join(", ") : null,
      ]
        .filter(Boolean)
        .join(" · "),
    ),
  ];
}

/** A form for a new model: spec, name, base URL, key (write-only), flags, window. */
function modelForm(title, submitLabel, onSubmit) {
  const spec = h("input", { name: "spec", required: true, autocomplete: "off", placeholder: "openai:gpt-4o-mini", class: "mono" });
  const name = h("input", { name: "name", required: true, autocomplete: "off", maxlength: "200" });
  const baseUrl = h("input", { name: "base_url", type: "url", autocomplete: "off" });
  // never pre-filled, never read back: the browser must not offer to save it either
  const key = h("input", { name: "api_key", type: "password", autocomplete: "new-password", spellcheck: "false" });
  const contextWindow = h("input", { name: "context_window", type: "number", min: "1", step: "1" });
  const boxes = CAPABILITIES.map(([cap, on]) => {
    const box = h("input", { type: "checkbox", name: cap, checked: on, id: uid() });
    return { cap, box, node: h("span", { class: "checkbox" }, box, h("label", { for: box.id }, t(`models.cap.${cap}`))) };
  });
  const status = h("p", { role: "status", class: "notice" });
  const form = h(
    "form",
    { class: "model-form" },
    h("h3", {}, title),
    field(t("models.spec"), spec, t("models.specHint")),
    field(t("models.name"), name),
    field(t("models.baseUrl"), baseUrl, t("models.baseUrlHint")),
    field(t("models.apiKey"), key, t("models.apiKeyHint")),
    h("fieldset", { class: "caps" }, h("legend", {}, t("models.capabilities")), boxes.map((b) => b.node)),
    field(t("models.contextWindow"), contextWindow),
    h("button", { type: "submit", class: "primary" }, submitLabel),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "";
    const body = {
      spec: spec.value.trim(),
      name: name.value.trim(),
      capabilities: Object.fromEntries(boxes.map((b) => [b.cap, b.box.checked])),
    };
    if (baseUrl.value.trim()) body.base_url = baseUrl.value.trim();
    if (key.value) body.api_key = key.value;
    if (contextWindow.value) body.context_window = Number.parseInt(contextWindow.value, 10);
    try {
      await onSubmit(body);
      for (const input of [spec, name, baseUrl, contextWindow]) input.value = "";
      for (const b of boxes) b.box.checked = CAPABILITIES.find(([cap]) => cap === b.cap)[1];
      status.textContent = t("models.added");
    } catch (e) {
      status.textContent = `${e.code}: ${e.message}`;
    } finally {
      key.value = ""; // the key leaves the page once sent, accepted or not
    }
  });
  return form;
}

export default {
  id: "models",
  label: "panel.models",
  requires: ["/api/models", "/api/me/models", "/api/me/models/{model_id}"],
  needsThread: false,
  mount(ctx, host) {
    const admin = ctx.me.is_admin && ctx.has("/api/models/{model_id}");
    const error = h("p", { class: "error", role: "alert" });
    const pickable = h("ul", { class: "model-list pickable" });
    const mine = h("ul", { class: "model-list mine" });
    const platform = h("ul", { class: "model-list platform" });
    let disposed = false;
    const report = (e) => {
      error.textContent = `${e.code}: ${e.message}`;
    };

    fill(
      host,
      h("h2", {}, t("panel.models")),
      error,
      h("h3", {}, t("models.pickable")),
      pickable,
      h("h3", {}, t("models.mine")),
      mine,
      modelForm(t("models.newMine"), t("models.add"), async (body) => {
        await api("POST", "/api/me/models", body);
        refresh();
      }),
      admin ? [h("h3", {}, t("models.platform")), platform] : null,
      admin
        ? modelForm(t("models.newPlatform"), t("models.add"), async (body) => {
            await api("POST", "/api/models", body);
            refresh();
          })
        : null,
    );

    // a new key for a model (PATCH {api_key}), or none: the key is write-only here too
    function keyEditor(path, model) {
      const box = h("input", { type: "password", autocomplete: "new-password", spellcheck: "false", "aria-label": t("models.newKey"), placeholder: t("models.newKey") });
      const set = h("button", { type: "submit" }, t("models.setKey"));
      const form = h("form", { class: "key-form" }, box, set);
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        if (!box.value) return;
        const key = box.value;
        box.value = "";
        try {
          await api("PATCH", path, { api_key: key });
        } catch (e) {
          report(e);
        }
        refresh();
      });
      return [
        form,
        model.has_key
          ? confirmButton(t("models.removeKey"), t("models.removeKeyConfirm"), async () => {
              try {
                await api("PATCH", path, { api_key: null });
              } catch (e) {
                report(e);
              }
              refresh();
            })
          : null,
      ];
    }

    function removeButton(path) {
      return confirmButton(t("models.remove"), t("models.removeConfirm"), async () => {
        try {
          await api("DELETE", path);
        } catch (e) {
          report(e);
        }
        refresh();
      });
    }

    function platformItem(model) {
      const toggle = h("input", { type: "checkbox", checked: model.enabled, id: uid() });
      toggle.addEventListener("change", async () => {
        try {
          await api("PATCH", `/api/models/${model.id}`, { enabled: toggle.checked });
        } catch (e) {
          report(e);
        }
        refresh();
      });
      return h(
        "li",
        { dataset: { modelId: model.id } },
        h("strong", {}, model.name),
        " ",
        modelFacts(model),
        h(
          "div",
          { class: "buttons" },
          h("span", { class: "checkbox" }, toggle, h("label", { for: toggle.id }, t("models.enabled"))),
          keyEditor(`/api/models/${model.id}`, model),
          removeButton(`/api/models/${model.id}`),
        ),
      );
    }

    async function refresh() {
      let all;
      let own;
      try {
        [all, own] = await Promise.all([api("GET", "/api/models"), api("GET", "/api/me/models")]);
      } catch (e) {
        report(e);
        return;
      }
      if (disposed) return;
      const usable = all.filter((m) => m.enabled);
      fill(
        pickable,
        h("li", { dataset: { spec: "builtin:scripted" } }, h("strong", {}, "builtin:scripted"), " ", h("small", {}, t("models.builtin"))),
        usable.map((m) => h("li", { dataset: { spec: m.spec } }, h("strong", {}, m.name), " ", modelFacts(m))),
      );
      fill(
        mine,
        own.length
          ? own.map((m) =>
              h(
                "li",
                { dataset: { modelId: m.id } },
                h("strong", {}, m.name),
                " ",
                modelFacts(m),
                h("div", { class: "buttons" }, keyEditor(`/api/me/models/${m.id}`, m), removeButton(`/api/me/models/${m.id}`)),
              ),
            )
          : h("li", { class: "empty" }, t("models.noneMine")),
      );
      if (admin) {
        const rows = all.filter((m) => m.owner === "platform");
        fill(platform, rows.length ? rows.map(platformItem) : h("li", { class: "empty" }, t("models.nonePlatform")));
      }
    }

    refresh();
    return () => {
      disposed = true;
    };
  },
};
