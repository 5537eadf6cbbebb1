// Building the page from nodes, never from HTML strings: every string a user, an agent or the server
// wrote becomes a text node. The only HTML parsed is Markdown, through DOMPurify
// (markdown.js).

/** h("button", {class: "x", onclick: fn, "aria-label": "…"}, "text", child, …) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "value") {
      el.value = value;
    } else if (key === "checked" || key === "disabled" || key === "selected" || key === "hidden") {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let uniqueId = 0;
/** An id for label/aria references. */
export function uid(prefix = "f") {
  uniqueId += 1;
  return `${prefix}-${uniqueId}`;
}

/** A labelled form control: <label for> + the control (+ a hint). */
export function field(label, control, hint) {
  if (!control.id) control.id = uid();
  const hintEl = hint ? h("small", { class: "hint", id: `${control.id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hintEl);
}

export function formatBytes(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** Seconds between two timestamps, e.g. "1.25 s". */
export function duration(from, to) {
  if (!from || !to) return "";
  return `${((new Date(to) - new Date(from)) / 1000).toFixed(2)} s`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

/** A button that asks "really?" on its first press and acts on the second. */
export function confirmButton(label, confirmLabel, action, attrs = {}) {
  const button = h("button", { type: "button", ...attrs }, label);
  let armed = false;
  let timer;
  button.addEventListener("click", () => {
    if (!armed) {
      armed = true;
      button.textContent = confirmLabel;
      button.classList.add("danger");
      timer = setTimeout(() => {
        armed = false;
        button.textContent = label;
        button.classList.remove("danger");
      }, 4000);
      return;
    }
    clearTimeout(timer);
    action();
  });
  return button;
}
