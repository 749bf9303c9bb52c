// The trio_agents dev UI: plain JavaScript over the HTTP API of the same server.
//
// Runs stream from POST /run_sse, read with fetch and a ReadableStream (EventSource cannot
// POST). Every committed event becomes a card in the timeline, in the lane of its branch;
// partial chunks only stream into the chat. The terminal frame (done, cancelled or error) ends
// the run, and the Cancel button POSTs the cancel route of the invocation in flight.
//
// A run that ends on calls only the user can answer (long-running calls, and
// adk_request_confirmation requests for a tool's approval) leaves them open: they are listed
// with Approve/Deny or a JSON answer box, and answering one sends its function response with
// the invocation's id, so the same invocation carries on in the same view. A run of a resumable
// app that failed or was cancelled offers Resume: the invocation again, without a message.
"use strict";

const TOKEN_KEY = "trio_agents.token";
const CONFIRMATION = "adk_request_confirmation";
const $ = (id) => document.getElementById(id);

const ui = {
  app: $("app"), user: $("user"), session: $("session"), newSession: $("new-session"),
  tokenButton: $("token-button"), tokenForm: $("token-form"), token: $("token"),
  notice: $("notice"), chat: $("chat"), status: $("status"), composer: $("composer"),
  message: $("message"), send: $("send"), cancel: $("cancel"), resume: $("resume"),
  state: $("state"),
  timeline: $("timeline"), openCalls: $("open-calls"), openList: $("open-list"),
};

const current = {
  running: false,
  invocationId: null,
  lanes: new Map(), // lane name -> column number
  rows: 1, // the timeline's last used grid row (row 1 holds the lane headers)
  streaming: new Map(), // author + branch -> the chat bubble receiving partial chunks
  open: new Map(), // call id -> {call, invocationId}: calls waiting for the user's answer
  resumable: null, // the id of the invocation Resume runs again (it failed or was cancelled)
};

// -- the API ------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(path, init);
  if (response.status === 401) askForToken();
  if (!response.ok) {
    const error = await response.json().catch(() => ({}));
    throw new ApiError(response.status, error.detail || response.statusText);
  }
  return response;
}

const getJson = async (path) => (await api("GET", path)).json();
const enc = encodeURIComponent;
const sessionsPath = () => `/apps/${enc(ui.app.value)}/users/${enc(ui.user.value)}/sessions`;
const sessionPath = () => `${sessionsPath()}/${enc(ui.session.value)}`;

// The frames of an SSE response: {event, id, data} with data parsed as JSON.
async function* sseFrames(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = parseFrame(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (frame) yield frame;
    }
  }
}

function parseFrame(block) {
  const frame = { event: "message", id: null, data: [] };
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue; // ": ping" keeps the connection alive
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "data") frame.data.push(value);
    else if (name === "event") frame.event = value;
    else if (name === "id") frame.id = Number(value);
  }
  return frame.data.length ? { ...frame, data: JSON.parse(frame.data.join("\n")) } : null;
}

// -- small helpers ----------------------------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const pretty = (value) => JSON.stringify(value, null, 2);
const short = (text, limit = 90) => (text.length > limit ? `${text.slice(0, limit - 1)}…` : text);
const isEmpty = (value) => !value || Object.keys(value).length === 0;

function notify(message) {
  ui.notice.textContent = message;
  ui.notice.hidden = !message;
}

function setStatus(state, text) {
  ui.status.dataset.state = state;
  ui.status.textContent = text;
}

function setRunning(running) {
  current.running = running;
  ui.send.disabled = running;
  ui.cancel.disabled = !running || !current.invocationId;
  ui.resume.hidden = running || !current.resumable;
  for (const control of [ui.app, ui.user, ui.session, ui.newSession]) control.disabled = running;
  renderOpenCalls();
}

// -- apps and sessions --------------------------------------------------------------------------

async function loadApps() {
  const apps = await getJson("/list-apps");
  ui.app.replaceChildren(...apps.map((name) => new Option(name, name)));
  notify(apps.length ? "" : "This server has no apps.");
  await loadSessions();
}

async function loadSessions(selected) {
  const sessions = await getJson(sessionsPath());
  sessions.sort((a, b) => b.lastUpdateTime - a.lastUpdateTime);
  const options = sessions.map((s) => new Option(`${s.id} · ${clock(s.lastUpdateTime)}`, s.id));
  if (!options.length) options.push(new Option("(none yet: Send starts one)", ""));
  ui.session.replaceChildren(...options);
  if (selected) ui.session.value = selected;
  await showSession();
}

const clock = (seconds) => new Date(seconds * 1000).toLocaleTimeString();

async function newSession() {
  const response = await api("POST", sessionsPath(), {});
  const session = await response.json();
  await loadSessions(session.id);
  return session.id;
}

async function showSession() {
  clearViews();
  if (!ui.session.value) return;
  const session = await getJson(sessionPath());
  session.events.forEach((event, index) => showEvent(event, index + 1));
  ui.state.textContent = pretty(session.state);
  renderOpenCalls();
  if (current.open.size) setStatus("paused", waitingText());
}

async function refreshState() {
  if (!ui.session.value) return;
  const session = await getJson(sessionPath());
  ui.state.textContent = pretty(session.state);
}

function clearViews() {
  ui.chat.replaceChildren();
  ui.timeline.replaceChildren();
  ui.timeline.style.gridTemplateColumns = "";
  ui.state.textContent = "{}";
  current.lanes.clear();
  current.rows = 1;
  current.streaming.clear();
  current.open.clear();
  current.resumable = null;
  ui.resume.hidden = true;
  renderOpenCalls();
  setStatus("idle", "idle");
}

// -- running ------------------------------------------------------------------------------------

async function send(text) {
  if (current.running || !text.trim()) return;
  if (!ui.session.value) await newSession();
  const message = { role: "user", parts: [{ text }] };
  showUserTurn(text);
  await run(message, null);
}

// Run `message` (resuming `invocationId` when given; no message: run it again from where it
// stopped) to its terminal frame; false if the request failed.
async function run(message, invocationId) {
  current.invocationId = invocationId;
  current.resumable = null;
  setRunning(true);
  setStatus("running", invocationId ? `resuming invocation ${invocationId}…` : "running…");
  try {
    await stream(message, invocationId);
    return true;
  } catch (error) {
    setStatus("error", `error: ${error.message}`);
    return false;
  } finally {
    setRunning(false);
    await refreshState().catch(() => {});
  }
}

async function stream(message, invocationId) {
  const body = {
    appName: ui.app.value,
    userId: ui.user.value,
    sessionId: ui.session.value,
    streaming: true,
  };
  if (message) body.newMessage = message;
  if (invocationId) body.invocationId = invocationId;
  const response = await api("POST", "/run_sse", body);
  for await (const frame of sseFrames(response)) {
    if (frame.event !== "message") return showTerminal(frame.event, frame.data);
    onEvent(frame.data, frame.id);
  }
  setStatus("error", "error: the stream ended without a terminal frame");
}

function onEvent(event, seq) {
  if (!current.invocationId && event.invocationId) {
    current.invocationId = event.invocationId;
    ui.cancel.disabled = false;
    setStatus("running", `running… (invocation ${event.invocationId})`);
  }
  if (event.partial) streamChunk(event);
  else showEvent(event, seq);
}

async function resumeRun() {
  const invocationId = current.resumable;
  if (current.running || !invocationId) return;
  showUserTurn(`resume ${invocationId}`);
  await run(null, invocationId);
}

async function cancelRun() {
  if (!current.invocationId) return;
  ui.cancel.disabled = true;
  setStatus("cancelling", "cancelling…");
  const path = `${sessionPath()}/invocations/${enc(current.invocationId)}/cancel`;
  try {
    await api("POST", path);
  } catch (error) {
    if (error.status !== 404) notify(`Cancel failed: ${error.message}`); // 404: already over
  }
}

function showTerminal(kind, data) {
  const error = data.error ? `: ${data.error}` : "";
  const paused = kind === "done" && (data.paused || current.open.size > 0);
  if (paused) setStatus("paused", waitingText());
  else setStatus(kind, `${kind}${error}`);
  const row = el("div", `terminal ${paused ? "paused" : kind}`, `■ ${paused ? "paused" : kind}${error}`);
  placeRow(row);
  if (data.resumable) current.resumable = data.invocationId;
  for (const bubble of current.streaming.values()) bubble.classList.remove("live");
  current.streaming.clear();
}

// -- the chat -----------------------------------------------------------------------------------

function showUserTurn(text) {
  if (!text) return;
  ui.chat.append(bubble("user", "you", text));
  const row = el("div", "turn", `user: ${short(text)}`);
  placeRow(row);
  scrollDown();
}

function bubble(kind, author, text) {
  const item = el("li", `bubble ${kind}`);
  item.append(el("span", "who", author), el("span", "text", text));
  return item;
}

function streamChunk(event) {
  const text = textOf(event);
  if (!text) return;
  const key = `${event.author}|${event.branch || ""}`;
  let item = current.streaming.get(key);
  if (!item) {
    item = bubble("agent live", event.author, "");
    current.streaming.set(key, item);
    ui.chat.append(item);
  }
  item.querySelector(".text").textContent += text;
  scrollDown();
}

function chatEvent(event) {
  if (event.author === "user") return;
  const key = `${event.author}|${event.branch || ""}`;
  const live = current.streaming.get(key);
  current.streaming.delete(key);
  const text = textOf(event);
  if (text) {
    const item = live || bubble("agent", event.author, "");
    item.classList.remove("live");
    item.querySelector(".text").textContent = text;
    if (!live) ui.chat.append(item);
  } else if (live) {
    live.remove();
  }
  for (const line of callLines(event)) ui.chat.append(bubble("tool", event.author, line));
  scrollDown();
}

const scrollDown = () => ui.chat.scrollTo({ top: ui.chat.scrollHeight });

// -- events -------------------------------------------------------------------------------------

const partsOf = (event) => (event.content && event.content.parts) || [];
const textOf = (event) => partsOf(event).map((part) => part.text || "").join("");

const callText = (call) => `${call.name}(${JSON.stringify(call.args || {})})`;

function callLines(event) {
  const lines = [];
  for (const part of partsOf(event)) {
    const call = part.functionCall;
    if (call && call.name === CONFIRMATION) {
      const original = (call.args && call.args.originalFunctionCall) || {};
      lines.push(`asks you to confirm ${callText(original)}`);
    } else if (call) {
      const waits = (event.longRunningToolIds || []).includes(call.id) ? " (waits for you)" : "";
      lines.push(`call ${callText(call)}${waits}`);
    }
    if (part.functionResponse) {
      const answer = JSON.stringify(part.functionResponse.response);
      lines.push(`${part.functionResponse.name} → ${short(answer)}`);
    }
  }
  const transfer = event.actions && event.actions.transferToAgent;
  if (transfer) lines.push(`transfer to ${transfer}`);
  return lines;
}

function summaryOf(event) {
  const text = textOf(event);
  if (event.errorCode || event.errorMessage) {
    return `error ${event.errorCode || ""} ${event.errorMessage || ""}`.trim();
  }
  const lines = callLines(event);
  if (lines.length) return short(lines.join("; "));
  if (text) return short(text);
  const actions = event.actions || {};
  if (actions.escalate) return "escalate";
  if (actions.endOfAgent) return "checkpoint: end of agent";
  if (actions.agentState) return `checkpoint: ${short(JSON.stringify(actions.agentState))}`;
  return "(no content)";
}

function showEvent(event, seq) {
  trackCalls(event);
  if (event.author === "user") {
    showUserTurn(textOf(event) || callLines(event).join("\n"));
    return;
  }
  chatEvent(event);
  const lane = laneOf(event.branch || "main");
  const card = eventCard(event, seq);
  card.style.gridColumn = String(lane);
  card.dataset.lane = String(lane);
  placeRow(card);
}

function eventCard(event, seq) {
  const actions = event.actions || {};
  const card = el("details", "event");
  Object.assign(card.dataset, { seq: seq ?? "", author: event.author, branch: event.branch || "" });
  const summary = el("summary");
  summary.append(el("span", "seq", seq ? `#${seq}` : ""), el("span", "author", event.author));
  if (!isEmpty(actions.stateDelta)) summary.append(el("span", "badge state", "Δ state"));
  if (!isEmpty(actions.artifactDelta)) summary.append(el("span", "badge artifact", "Δ artifact"));
  summary.append(el("span", "what", summaryOf(event)));
  const raw = el("details", "raw");
  raw.append(el("summary", "", "event JSON"), el("pre", "", pretty(event)));
  card.append(
    summary,
    el("h4", "", "State delta"),
    el("pre", "state-delta", isEmpty(actions.stateDelta) ? "none" : pretty(actions.stateDelta)),
    el("h4", "", "Artifact delta"),
    el("pre", "artifact-delta", isEmpty(actions.artifactDelta) ? "none" : pretty(actions.artifactDelta)),
    raw,
  );
  return card;
}

// The column of a lane, adding it (and its header) on first use.
function laneOf(name) {
  if (!current.lanes.has(name)) {
    const column = current.lanes.size + 1;
    current.lanes.set(name, column);
    const head = el("div", "lane-head", name === "main" ? "main (no branch)" : name);
    head.style.gridColumn = String(column);
    head.style.setProperty("--lane", column);
    head.dataset.lane = name;
    ui.timeline.append(head);
    ui.timeline.style.gridTemplateColumns = `repeat(${column}, minmax(15rem, 1fr))`;
  }
  return current.lanes.get(name);
}

function placeRow(node) {
  if (!current.lanes.size) laneOf("main");
  current.rows += 1;
  node.style.gridRow = String(current.rows);
  if (node.dataset.lane) node.style.setProperty("--lane", node.dataset.lane);
  ui.timeline.append(node);
  ui.timeline.parentElement.scrollTo({ top: ui.timeline.scrollHeight });
}

// -- calls waiting for the user --------------------------------------------------------------

const isConfirmation = (call) => call.name === CONFIRMATION;

// Open the calls `event` leaves to the user; close those a user's function response answers.
function trackCalls(event) {
  const waiting = event.longRunningToolIds || [];
  for (const part of partsOf(event)) {
    const call = part.functionCall;
    if (call && call.id && (waiting.includes(call.id) || isConfirmation(call))) {
      current.open.set(call.id, { call, invocationId: event.invocationId });
    }
    const answer = part.functionResponse;
    if (answer && event.author === "user") current.open.delete(answer.id);
  }
}

function waitingText() {
  const names = [...current.open.values()].map(({ call }) =>
    isConfirmation(call) ? `approval of ${(call.args.originalFunctionCall || {}).name}` : call.name);
  return `paused: waiting for ${names.join(", ")}`;
}

function renderOpenCalls() {
  const entries = [...current.open.values()];
  ui.openCalls.hidden = current.running || !entries.length;
  ui.openList.replaceChildren(...entries.map(openCallCard));
}

function openCallCard(entry) {
  const { call } = entry;
  const item = el("li", "open-call");
  Object.assign(item.dataset, {
    callId: call.id, name: call.name, kind: isConfirmation(call) ? "confirmation" : "long-running",
  });
  const problem = el("div", "problem");
  problem.hidden = true;
  if (isConfirmation(call)) {
    const args = call.args || {};
    const original = args.originalFunctionCall || {};
    const hint = (args.toolConfirmation && args.toolConfirmation.hint) || `Run ${original.name}?`;
    const payload = jsonBox("payload", "optional JSON payload sent with your answer");
    const approve = button("approve", "Approve", () => confirmCall(entry, true, payload, problem));
    const deny = button("deny", "Deny", () => confirmCall(entry, false, payload, problem));
    item.append(el("div", "hint", hint), el("code", "original", callText(original)), payload,
      buttons(approve, deny), problem);
  } else {
    const box = jsonBox("answer-json", 'the answer as JSON, e.g. {"status": "approved"}');
    const send = button("answer", "Answer", () => answerCall(entry, box, problem));
    item.append(el("div", "hint", `${call.name} waits for your answer`),
      el("code", "call", callText(call)), box, buttons(send), problem);
  }
  return item;
}

function jsonBox(className, placeholder) {
  const box = el("textarea", className);
  Object.assign(box, { rows: 2, placeholder, spellcheck: false });
  return box;
}

function button(className, label, onClick) {
  const node = el("button", className, label);
  node.type = "button";
  node.addEventListener("click", guarded(onClick));
  return node;
}

function buttons(...nodes) {
  const row = el("div", "buttons");
  row.append(...nodes);
  return row;
}

// The JSON in `box`: null when empty, undefined (and the problem shown) when it is not JSON.
function readJson(box, problem) {
  const text = box.value.trim();
  problem.hidden = true;
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch (error) {
    problem.textContent = `not JSON: ${error.message}`;
    problem.hidden = false;
    return undefined;
  }
}

async function confirmCall(entry, confirmed, box, problem) {
  const payload = readJson(box, problem);
  if (payload === undefined) return;
  const response = payload === null ? { confirmed } : { confirmed, payload };
  await answer(entry, response);
}

async function answerCall(entry, box, problem) {
  const value = readJson(box, problem);
  if (value === undefined) return;
  if (value === null) {
    problem.textContent = "type the answer (JSON) first";
    problem.hidden = false;
    return;
  }
  const isObject = typeof value === "object" && !Array.isArray(value);
  await answer(entry, isObject ? value : { result: value });
}

// Send the function response answering `entry`'s call, resuming its invocation.
async function answer(entry, response) {
  if (current.running) return;
  const { call, invocationId } = entry;
  const part = { functionResponse: { id: call.id, name: call.name, response } };
  current.open.delete(call.id);
  showUserTurn(`${call.name} → ${JSON.stringify(response)}`);
  if (!(await run({ role: "user", parts: [part] }, invocationId))) {
    current.open.set(call.id, entry); // refused: the call is still open
    renderOpenCalls();
  }
}

// -- the bearer token ---------------------------------------------------------------------------

function askForToken() {
  ui.tokenForm.hidden = false;
  notify("This server needs a bearer token: enter it above.");
  ui.token.focus();
}

async function useToken(event) {
  event.preventDefault();
  const token = ui.token.value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  ui.tokenForm.hidden = true;
  notify("");
  await guarded(loadApps)();
}

// -- wiring -------------------------------------------------------------------------------------

// Run an async handler, showing its failure rather than losing it.
const guarded = (handler) => async (...args) => {
  try {
    await handler(...args);
  } catch (error) {
    if (error.status !== 401) notify(error.message);
  }
};

function submitMessage(event) {
  event.preventDefault();
  const text = ui.message.value;
  ui.message.value = "";
  return send(text);
}

ui.app.addEventListener("change", guarded(() => loadSessions()));
ui.user.addEventListener("change", guarded(() => loadSessions()));
ui.session.addEventListener("change", guarded(showSession));
ui.newSession.addEventListener("click", guarded(newSession));
ui.composer.addEventListener("submit", guarded(submitMessage));
ui.message.addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey) return;
  event.preventDefault();
  ui.composer.requestSubmit();
});
ui.cancel.addEventListener("click", guarded(cancelRun));
ui.resume.addEventListener("click", guarded(resumeRun));
ui.tokenButton.addEventListener("click", () => { ui.tokenForm.hidden = !ui.tokenForm.hidden; });
ui.tokenForm.addEventListener("submit", useToken);

guarded(loadApps)();
