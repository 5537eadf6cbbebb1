// Server-Sent Events over fetch(): EventSource cannot send a Bearer token. Litestar
// ends lines with CRLF, so line endings are normalised (a CR at the end of one chunk
// may be followed by the LF at the start of the next). A stream that breaks before its
// `end` reconnects from the last seq it saw (Last-Event-ID and ?after_seq).

import { ApiError, authHeaders } from "./api.js";

/** Parses event blocks out of a growing text buffer; returns [events, rest]. */
export function parseBlocks(buffer) {
  const events = [];
  let rest = buffer;
  for (;;) {
    const end = rest.indexOf("\n\n");
    if (end < 0) break;
    const block = rest.slice(0, end);
    rest = rest.slice(end + 2);
    const event = { event: "message", data: [], id: null, retry: null };
    let seen = false;
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      seen = true;
      if (name === "event") event.event = value;
      else if (name === "data") event.data.push(value);
      else if (name === "id") event.id = value;
      else if (name === "retry" && /^\d+$/.test(value)) event.retry = Number(value);
    }
    if (seen) events.push({ ...event, data: event.data.join("\n") });
  }
  return [events, rest];
}

/** CRLF and lone CR become LF; a trailing CR waits for the next chunk. */
export function normalise(pending) {
  const hold = pending.endsWith("\r") ? "\r" : "";
  const text = hold ? pending.slice(0, -1) : pending;
  return [text.replace(/\r\n?/g, "\n"), hold];
}

/**
 * Streams a run's events until its `end`, reconnecting after a broken connection.
 * onEvent({event, data (parsed JSON), seq}) is called for each. Resolves with the
 * `end` event's data; rejects on an API error (404, 401) or when `signal` aborts.
 */
export async function streamRun(runId, { afterSeq = null, onEvent, signal, onReconnect }) {
  let lastSeq = afterSeq;
  let delay = 500;
  for (;;) {
    const headers = authHeaders({ accept: "text/event-stream" });
    let url = `/api/agent/runs/${encodeURIComponent(runId)}/events`;
    if (lastSeq !== null) {
      headers["Last-Event-ID"] = String(lastSeq);
      url += `?after_seq=${lastSeq}`;
    }
    let response;
    try {
      response = await fetch(url, { headers, signal, cache: "no-store" });
    } catch (error) {
      if (signal && signal.aborted) throw error;
      response = null;
    }
    if (response && !response.ok) {
      let code = `http_${response.status}`;
      let message = response.statusText;
      try {
        const body = await response.json();
        code = body.error.code;
        message = body.error.message;
      } catch {
        // keep the status
      }
      throw new ApiError(response.status, code, message);
    }
    if (response) {
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let hold = "";
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          let text;
          [text, hold] = normalise(hold + decoder.decode(value, { stream: true }));
          buffer += text;
          let events;
          [events, buffer] = parseBlocks(buffer);
          for (const raw of events) {
            if (raw.retry !== null) delay = raw.retry;
            if (raw.id !== null && /^\d+$/.test(raw.id)) lastSeq = Number(raw.id);
            let data = null;
            try {
              data = raw.data ? JSON.parse(raw.data) : null;
            } catch {
              data = raw.data;
            }
            const event = { event: raw.event, data, seq: raw.id === null ? null : Number(raw.id) };
            onEvent(event);
            if (raw.event === "end") {
              reader.cancel().catch(() => {});
              return data;
            }
          }
        }
      } catch (error) {
        if (signal && signal.aborted) throw error;
      }
    }
    // broken before `end`: wait a little, then continue after the last seq seen
    if (onReconnect) onReconnect(lastSeq);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 8000);
    if (lastSeq === null) lastSeq = 0;
  }
}

/** Every stored event of a finished run (the run panel's raw events). */
export async function readAllEvents(runId, signal) {
  const events = [];
  await streamRun(runId, { onEvent: (event) => events.push(event), signal });
  return events;
}
