// Drives /lg with the JS LangGraph SDK as agent-chat-ui's useStream does: the same
// client.runs.stream(...) payloads its submit, regenerate and resume send (read from
// agent-chat-ui src/components/thread/index.tsx, agent-inbox, and the SDK's
// react/stream.lgp.js). Prints one JSON line: what the client saw at each step.
// tests/lg/test_js_sdk.py runs it and asserts.
//
//   node agent_chat_ui.mjs URL TOKEN THREAD_ID STEP...
//   STEP: message=TEXT | regenerate | resume=ANSWER, run one after the other
import { Client } from "@langchain/langgraph-sdk";

const [url, token, threadId, ...steps] = process.argv.slice(2);
const client = new Client({ apiUrl: url, apiKey: token, callerOptions: { maxRetries: 0 } });
const ASSISTANT = "chatbot";
// useStream's stream modes for agent-chat-ui: "values" asked by each submit, plus
// "messages-tuple" and "values" (it reads stream.messages) and "custom" (onCustomEvent)
const TRACKED = ["messages-tuple", "values", "custom"];
const unique = (modes) => [...new Set(modes)];

async function collect(payload) {
  const created = [];
  const parts = [];
  try {
    for await (const part of client.runs.stream(threadId, ASSISTANT, {
      ...payload,
      onRunCreated: (meta) => created.push(meta),
    })) {
      parts.push({ event: part.event, data: part.data, id: part.id ?? null });
    }
  } catch (error) {
    // the SDK's HTTPError carries the status and the response body as text
    return { created, parts, error: { status: error.status ?? null, body: error.text ?? String(error) } };
  }
  return { created, parts, error: null };
}

// thread/index.tsx handleSubmit: a human message with text content blocks, no context
function submitMessage(message) {
  const human = { id: crypto.randomUUID(), type: "human", content: [{ type: "text", text: message }] };
  const context = undefined;
  return collect({
    input: { messages: [human], context },
    config: undefined,
    context: undefined,
    streamMode: unique(["values", ...TRACKED]),
    streamSubgraphs: true,
    streamResumable: true,
    onDisconnect: "continue",
    checkpoint: undefined,
  });
}

// messages/ai.tsx: regenerate from the parent checkpoint of the state in which the last
// AI message was first seen (useStream's messageMetadata.firstSeenState)
async function regenerate() {
  const history = await client.threads.getHistory(threadId, { limit: 1000 });
  const states = [...history].reverse(); // oldest first
  const last = states.at(-1).values.messages.filter((m) => m.type === "ai").at(-1);
  const firstSeen = states.find((s) => (s.values?.messages ?? []).some((m) => m.id === last.id));
  const checkpoint = firstSeen?.parent_checkpoint ? { ...firstSeen.parent_checkpoint } : undefined;
  if (checkpoint) delete checkpoint.thread_id; // as useStream does
  const result = await collect({
    input: undefined,
    checkpoint,
    streamMode: unique(["values", ...TRACKED]),
    streamSubgraphs: true,
    streamResumable: true,
    onDisconnect: "continue",
  });
  return { ...result, checkpoint: checkpoint ?? null, head: states.at(-1).checkpoint.checkpoint_id };
}

// agent-inbox: submit({}, {command: {resume}}) with no stream options of its own
function resume(answer) {
  return collect({
    input: {},
    command: { resume: answer },
    streamMode: unique(TRACKED),
    streamResumable: false,
    onDisconnect: "cancel",
  });
}

const STEPS = { message: submitMessage, regenerate, resume };
const seen = [];
for (const step of steps) {
  const [name, ...rest] = step.split("=");
  if (!STEPS[name]) {
    console.error(`unknown step ${step}`);
    process.exit(2);
  }
  seen.push(await STEPS[name](rest.join("=")));
}
console.log(JSON.stringify(seen));
