// Sign-in: paste an API token (kept in sessionStorage: gone when the tab closes), or
// open a login link printed by `yuxi up` / `yuxi user login-link NAME`.

import { api, setToken } from "./api.js";
import { field, h } from "./dom.js";
import { getLang, LANGUAGES, setLang, t } from "./i18n.js";

export function mountSignIn(_ctx, loginError, onSignedIn) {
  const input = h("input", {
    type: "password",
    name: "token",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "yx_…",
  });
  const status = h("p", { class: "error", role: "alert" });
  if (loginError) status.textContent = `${loginError.code}: ${t("signin.linkFailed")}`;
  const form = h(
    "form",
    { class: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, t("signin.title")),
    h("p", {}, t("signin.intro")),
    field(t("signin.token"), input, t("signin.tokenHint")),
    h("button", { type: "submit" }, t("signin.submit")),
    status,
    h("p", { class: "hint" }, t("signin.link")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "";
    setToken(input.value.trim());
    try {
      await api("GET", "/api/me", undefined, { noSignOut: true });
      onSignedIn();
    } catch (error) {
      setToken(null);
      status.textContent = `${error.code}: ${error.status === 401 ? t("signin.rejected") : error.message}`;
      input.focus();
    }
  });
  const lang = h(
    "select",
    { "aria-label": t("nav.language") },
    LANGUAGES.map(([code, name]) => h("option", { value: code, selected: code === getLang() }, name)),
  );
  lang.addEventListener("change", () => {
    setLang(lang.value);
    onSignedIn();
  });
  setTimeout(() => input.focus(), 0);
  return h("div", { class: "signin-page" }, h("div", { class: "signin-lang" }, lang), form);
}
