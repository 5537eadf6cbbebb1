// Markdown from agents, rendered safely: raw HTML in the text is shown as text (never
// parsed), marked turns the Markdown into HTML, and DOMPurify keeps only inert markup
// (no script, no event handlers, no javascript: URLs); links open in a new tab without
// a referrer. The page's CSP forbids inline script besides.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const marked = new Marked({
  async: false,
  gfm: true,
  breaks: true,
  renderer: {
    html: ({ text }) => escapeHtml(text),
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe"],
  FORBID_ATTR: ["style"],
};

/** A DocumentFragment of the rendered, sanitised Markdown. */
export function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(String(text ?? "")), PURIFY);
}
