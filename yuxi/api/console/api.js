// The API client: same origin, Bearer token from sessionStorage, errors as ApiError
// with the server's {error: {code, message}}. A 401 signs out (app.js shows sign-in).

const TOKEN_KEY = "yuxi.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let onUnauthorized = () => {};

export function setUnauthorizedHandler(handler) {
  onUnauthorized = handler;
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function authHeaders(extra = {}) {
  const token = getToken();
  return token ? { Authorization: `Bearer ${token}`, ...extra } : { ...extra };
}

async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, code, message);
}

/**
 * api("GET", "/api/chat/threads") → parsed JSON (null for 204).
 * body: an object (sent as JSON), a FormData, a string or a Blob (sent as is).
 * options.raw: return the Response (content, headers) instead of JSON.
 */
export async function api(method, path, body, options = {}) {
  const headers = authHeaders(options.headers || {});
  let payload;
  if (body instanceof FormData || body instanceof Blob || typeof body === "string") {
    payload = body;
  } else if (body !== undefined) {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, { method, headers, body: payload, signal: options.signal });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network_error", String(error.message || error));
  }
  if (response.status === 401 && !options.noSignOut) {
    const error = await errorOf(response);
    onUnauthorized(error);
    throw error;
  }
  if (!response.ok) throw await errorOf(response);
  if (options.raw) return response;
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/** The API's paths (from the OpenAPI document), to show only the panels that exist. */
export async function apiPaths() {
  try {
    const response = await fetch("/schema/openapi.json");
    if (!response.ok) return new Set();
    const doc = await response.json();
    return new Set(Object.keys(doc.paths || {}));
  } catch {
    return new Set();
  }
}
