// The console's shell: sign-in, the header, the thread list, the chat and the side
// panels. Each side panel is one module in panels/ that names the API paths it needs;
// a panel whose paths the server's OpenAPI document lacks is left out, so a panel for
// an API that lands later appears by itself.

import { ApiError, api, apiPaths, getToken, setToken, setUnauthorizedHandler } from "./api.js";
import { mountChat } from "./chat.js";
import { fill, h } from "./dom.js";
import { getLang, LANGUAGES, setLang, t } from "./i18n.js";
import { PANELS } from "./panels/index.js";
import { mountSignIn } from "./signin.js";
import { mountThreadList } from "./threads.js";

const root = document.getElementById("app");

const ctx = {
  me: null,
  paths: new Set(),
  threadId: null,
  thread: null,
  history: null,
  selectedRunId: null,
  bus: new EventTarget(),
  emit(name, detail) {
    this.bus.dispatchEvent(new CustomEvent(name, { detail }));
  },
  on(name, handler) {
    const listener = (event) => handler(event.detail);
    this.bus.addEventListener(name, listener);
    return () => this.bus.removeEventListener(name, listener);
  },
  has(path) {
    return this.paths.has(path);
  },
  openRun(runId) {
    this.selectedRunId = runId;
    showPanel("run");
    this.emit("run-selected", runId);
  },
};

let cleanups = [];
let chatCleanup = null;
let activePanel = sessionStorage.getItem("yuxi.panel") || "queue";
let panelHost = null;
let panelTabs = null;
let panelCleanup = null;

function cleanup() {
  for (const fn of cleanups) fn();
  cleanups = [];
  if (chatCleanup) chatCleanup();
  chatCleanup = null;
  if (panelCleanup) panelCleanup();
  panelCleanup = null;
}

setUnauthorizedHandler(() => {
  setToken(null);
  ctx.me = null;
  start();
});

function route() {
  const match = /^#\/thread\/([^/?#]+)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

async function redeemLoginLink() {
  const match = /^#login=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!match) return null;
  // the code leaves the address bar (and the history) before anything else happens
  history.replaceState(null, "", location.pathname);
  try {
    const result = await api("POST", "/api/console/login", { code: match[1] }, { noSignOut: true });
    setToken(result.token);
    return null;
  } catch (error) {
    return error;
  }
}

async function start() {
  cleanup();
  document.documentElement.lang = getLang() === "zh" ? "zh-CN" : "en";
  document.title = t("app.title");
  const loginError = await redeemLoginLink();
  if (!getToken()) {
    fill(root, mountSignIn(ctx, loginError, start));
    return;
  }
  try {
    [ctx.me, ctx.paths] = await Promise.all([api("GET", "/api/me"), apiPaths()]);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return; // handled: sign-in
    fill(root, h("p", { role: "alert", class: "error" }, `${error.code || ""} ${error.message}`));
    return;
  }
  renderShell();
}

function renderShell() {
  const threadsToggle = h(
    "button",
    { type: "button", class: "toggle", "aria-controls": "threads", "aria-expanded": "false" },
    t("nav.threads"),
  );
  const panelsToggle = h(
    "button",
    { type: "button", class: "toggle", "aria-controls": "panels", "aria-expanded": "false" },
    t("nav.panels"),
  );
  const langSelect = h(
    "select",
    { id: "lang", "aria-label": t("nav.language") },
    LANGUAGES.map(([code, name]) => h("option", { value: code, selected: code === getLang() }, name)),
  );
  langSelect.addEventListener("change", () => {
    setLang(langSelect.value);
    start();
  });
  const signOut = h("button", { type: "button", onclick: () => { setToken(null); start(); } }, t("nav.signOut"));
  const header = h(
    "header",
    { class: "top" },
    threadsToggle,
    h("h1", {}, h("a", { href: "#/" }, "yuxi")),
    h("span", { class: "who" }, ctx.me.name, ctx.me.is_admin ? h("span", { class: "badge" }, t("nav.admin")) : null),
    h("span", { class: "spacer" }),
    langSelect,
    signOut,
    panelsToggle,
  );
  const threads = h("nav", { id: "threads", class: "sidebar", "aria-label": t("nav.threads") });
  const main = h("main", { id: "main", tabindex: "-1" });
  panelTabs = h("div", { role: "tablist", class: "tabs", "aria-label": t("nav.panels") });
  panelHost = h("div", { class: "panel-body", role: "tabpanel", tabindex: "0" });
  const panels = h("aside", { id: "panels", class: "panels", "aria-label": t("nav.panels") }, panelTabs, panelHost);
  const layout = h("div", { class: "layout" }, threads, main, panels);
  fill(root, h("a", { href: "#main", class: "skip" }, t("nav.skip")), header, layout);

  for (const [button, target] of [[threadsToggle, threads], [panelsToggle, panels]]) {
    button.addEventListener("click", () => {
      const open = !target.classList.contains("open");
      target.classList.toggle("open", open);
      button.setAttribute("aria-expanded", String(open));
    });
  }
  // on a phone the thread list is a drawer: choosing a thread closes it
  threads.addEventListener("click", (event) => {
    if (event.target.closest("a")) {
      threads.classList.remove("open");
      threadsToggle.setAttribute("aria-expanded", "false");
    }
  });
  cleanups.push(mountThreadList(ctx, threads));
  const onRoute = () => {
    threads.classList.remove("open");
    renderMain(main);
  };
  window.addEventListener("hashchange", onRoute);
  cleanups.push(() => window.removeEventListener("hashchange", onRoute));
  renderMain(main);
}

function renderMain(main) {
  if (chatCleanup) chatCleanup();
  chatCleanup = null;
  ctx.threadId = route();
  ctx.thread = null;
  ctx.history = null;
  ctx.selectedRunId = null;
  if (ctx.threadId) {
    chatCleanup = mountChat(ctx, main, ctx.threadId);
  } else {
    fill(
      main,
      h("section", { class: "welcome" }, h("h2", {}, t("home.title")), h("p", {}, t("home.body"))),
    );
  }
  ctx.emit("thread-selected", ctx.threadId);
  renderPanels();
}

function availablePanels() {
  return PANELS.filter((panel) => panel.requires.every((path) => ctx.has(path)))
    .filter((panel) => !panel.needsThread || ctx.threadId);
}

function renderPanels() {
  const panels = availablePanels();
  // the panel last chosen, when this view has it; else the first (not remembered)
  activePanel = sessionStorage.getItem("yuxi.panel") || "queue";
  if (!panels.some((panel) => panel.id === activePanel) && panels.length) activePanel = panels[0].id;
  fill(
    panelTabs,
    panels.map((panel) =>
      h(
        "button",
        {
          type: "button",
          role: "tab",
          id: `tab-${panel.id}`,
          "aria-selected": String(panel.id === activePanel),
          tabindex: panel.id === activePanel ? "0" : "-1",
          dataset: { panel: panel.id },
          onclick: () => showPanel(panel.id),
          onkeydown: (event) => moveTab(event, panels),
        },
        t(panel.label),
      ),
    ),
  );
  mountPanel(panels.find((panel) => panel.id === activePanel));
}

function moveTab(event, panels) {
  const index = panels.findIndex((panel) => panel.id === activePanel);
  let next = null;
  if (event.key === "ArrowRight") next = panels[(index + 1) % panels.length];
  if (event.key === "ArrowLeft") next = panels[(index - 1 + panels.length) % panels.length];
  if (event.key === "Home") next = panels[0];
  if (event.key === "End") next = panels[panels.length - 1];
  if (!next) return;
  event.preventDefault();
  showPanel(next.id);
  panelTabs.querySelector(`[data-panel="${next.id}"]`)?.focus();
}

function showPanel(id) {
  activePanel = id;
  sessionStorage.setItem("yuxi.panel", id);
  if (panelTabs) renderPanels();
}

function mountPanel(panel) {
  if (panelCleanup) panelCleanup();
  panelCleanup = null;
  if (!panel) {
    fill(panelHost);
    return;
  }
  panelHost.setAttribute("aria-labelledby", `tab-${panel.id}`);
  panelHost.dataset.panel = panel.id;
  fill(panelHost);
  panelCleanup = panel.mount(ctx, panelHost) || null;
}

start();
