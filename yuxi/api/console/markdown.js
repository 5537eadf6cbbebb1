// Markdown from agents, rendered safely: marked turns it into HTML, DOMPurify keeps
// only inert markup (no script, no event handlers, no javascript: URLs), and links
// open in a new tab without a referrer.

import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

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
  const html = marked.parse(String(text ?? ""), { async: false, gfm: true, breaks: true });
  return DOMPurify.sanitize(html, PURIFY);
}
