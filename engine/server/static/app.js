// agentrio web dashboard: the `chat-` origin's front-end (SPEC R4, R8, §7).
//
// Plain ES module, no build step, no dependencies. Security rules this file keeps:
// - The token lives in sessionStorage (this tab only) and travels only as an
//   `Authorization: Bearer` header; there are no cookies, so no other origin can ride
//   a session (CSRF), and the token never appears in a URL or a log.
// - Events stream with fetch() + a ReadableStream reader of the SSE format, because
//   EventSource cannot send headers.
// - Every piece of daemon or event text reaches the page through textContent (the
//   `el` helper appends strings as text nodes); innerHTML is never used.

const TOKEN_KEY = "agentrio.token";
const SESSIONS_KEY = "agentrio.sessions";
const CURRENT_KEY = "agentrio.current";
const SESSION_ID = /^chat-[A-Za-z0-9_-]{1,123}$/;
const RECONNECT_MS = [500, 1000, 2000, 5000];

const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------ DOM helpers

/** An element; `attrs` keys: class, text, on<event>, anything else as an attribute.
 *  Children are nodes or strings (strings become text nodes, never markup). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

function button(label, action, onclick, extra = {}) {
  return el("button", { type: "button", "data-action": action, onclick, ...extra }, label);
}

function clock(at) {
  return new Date(at * 1000).toLocaleTimeString();
}

function short(hash) {
  return hash ? hash.slice(0, 8) : "?";
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// ------------------------------------------------------------------ API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

/** Sign out after a 401, unless the token was replaced meanwhile (a late refusal
 *  of a wrong token must not sign out the right one typed after it). */
function refused(used) {
  if (used === token()) signOut("The daemon refused this token.");
}

/** One JSON call to the daemon. A 401 signs out (the token is wrong or gone). */
async function api(method, path, body) {
  const used = token();
  const headers = { Authorization: `Bearer ${used}` };
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (response.status === 401) {
    refused(used);
    throw new ApiError(401, "unauthorized", "unauthorized");
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, data?.error?.code, data?.error?.message);
  }
  return data;
}

const sessionPath = (id) => `/v1/session/${encodeURIComponent(id)}`;

/** Messages of an SSE body: `{subscribed: true}` for the `: subscribed` comment, else
 *  the fields of each message (`id`, `event`, `task`, `data`). */
async function* sseMessages(body, signal) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  signal.addEventListener("abort", () => reader.cancel().catch(() => {}));
  let buffer = "";
  let fields = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      let line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (Object.keys(fields).length) yield fields;
        fields = {};
      } else if (line.startsWith(":")) {
        if (line === ": subscribed") yield { subscribed: true };
      } else {
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        let text = colon < 0 ? "" : line.slice(colon + 1);
        if (text.startsWith(" ")) text = text.slice(1);
        fields[name] = name === "data" && name in fields ? `${fields.data}\n${text}` : text;
      }
    }
  }
}

// ------------------------------------------------------------------ sessions list

function knownSessions() {
  try {
    const list = JSON.parse(localStorage.getItem(SESSIONS_KEY) || "[]");
    return Array.isArray(list) ? list.filter((id) => SESSION_ID.test(id)) : [];
  } catch {
    return [];
  }
}

function remember(id) {
  const list = knownSessions().filter((known) => known !== id);
  list.unshift(id);
  localStorage.setItem(SESSIONS_KEY, JSON.stringify(list));
}

function forget(id) {
  localStorage.setItem(SESSIONS_KEY, JSON.stringify(knownSessions().filter((k) => k !== id)));
}

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return `chat-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function renderSessions() {
  const list = $("session-list");
  list.replaceChildren();
  for (const id of knownSessions()) {
    const current = view?.sessionId === id;
    list.append(
      el(
        "li",
        { class: current ? "current" : "", "data-session": id },
        button(id, "select-session", () => select(id), { class: "link" }),
        button("×", "forget-session", () => {
          forget(id);
          if (current) select(knownSessions()[0] || newSessionId());
          else renderSessions();
        }, { class: "small quiet", title: "Remove from this list" }),
      ),
    );
  }
}

// ------------------------------------------------------------------ chat view

/** One session's chat: its event stream, task blocks and the side panels' data. */
class ChatView {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.tasks = new Map(); // task hash -> {block, body, badge, actions, text, state}
    this.controller = new AbortController();
    this.log = $("log");
    this.log.replaceChildren();
    $("chat-title").textContent = sessionId;
    this.stream();
  }

  close() {
    this.controller.abort();
  }

  status(text) {
    $("stream-status").textContent = text;
  }

  async stream() {
    const signal = this.controller.signal;
    for (let attempt = 0; !signal.aborted; attempt += 1) {
      this.status(attempt ? "reconnecting…" : "connecting…");
      const used = token();
      try {
        const response = await fetch(`${sessionPath(this.sessionId)}/events`, {
          headers: { Authorization: `Bearer ${used}` },
          cache: "no-store",
          credentials: "omit",
          signal,
        });
        if (response.status === 401) {
          refused(used);
          return;
        }
        if (!response.ok || !response.body) throw new ApiError(response.status);
        for await (const message of sseMessages(response.body, signal)) {
          if (message.subscribed) {
            // A fresh subscription replays recent events: start the log over.
            attempt = 0;
            this.reset();
            this.status("live");
            continue;
          }
          if (message.data === undefined) continue;
          this.handle(message.task || "", JSON.parse(message.data));
        }
      } catch (error) {
        if (signal.aborted) return;
        this.status(`disconnected: ${error.message}`);
      }
      const delay = RECONNECT_MS[Math.min(attempt, RECONNECT_MS.length - 1)];
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  reset() {
    this.tasks.clear();
    this.log.replaceChildren();
  }

  /** The block of a task, made on first sight (a replay may begin mid-task). */
  task(hash) {
    let task = this.tasks.get(hash);
    if (task) return task;
    const badge = el("span", { class: "badge", text: "running" });
    const actions = el("span", { class: "actions" });
    const body = el("div", { class: "task-body" });
    const block = el(
      "li",
      { class: "task", "data-task": hash },
      el("div", { class: "task-head" }, el("span", { class: "hash", text: `task ${short(hash)}` }),
        badge, actions),
      body,
    );
    this.log.append(block);
    task = { hash, block, body, badge, actions, text: null, state: "" };
    this.tasks.set(hash, task);
    return task;
  }

  add(task, node) {
    task.body.append(node);
    node.scrollIntoView({ block: "nearest" });
    return node;
  }

  setState(task, state) {
    task.state = state;
    task.badge.textContent = state;
    task.block.dataset.state = state;
    task.actions.replaceChildren();
    if (state === "running") {
      task.actions.append(
        button("Pause", "pause-task", () => this.stop(task, "pause")),
        button("Cancel", "cancel-task", () => this.stop(task, "cancel")),
      );
    }
    if (state !== "running") this.closeConfirms(task, "no longer waiting");
  }

  async stop(task, how) {
    try {
      await api("POST", `${sessionPath(this.sessionId)}/${how}/${task.hash}`);
    } catch (error) {
      this.add(task, el("div", { class: "note error", text: `${how} failed: ${error.message}` }));
    }
  }

  handle(hash, event) {
    const task = this.task(hash);
    if (event.kind !== "text") task.text = null;
    switch (event.kind) {
      case "task_started":
        this.add(task, el("div", { class: "user" }, el("span", { class: "who", text: "you" }),
          el("span", { class: "user-text", text: event.input })));
        if (event.resumed_from) {
          this.add(task, el("div", { class: "note", text: `resumed from task ${short(event.resumed_from)}` }));
          const selector = `.questions[data-task="${CSS.escape(event.resumed_from)}"][data-open]`;
          for (const card of this.log.querySelectorAll(selector)) {
            closeCard(card, "answered");
          }
        }
        this.setState(task, "running");
        break;
      case "text":
        if (!task.text) task.text = this.add(task, el("div", { class: "assistant" }));
        task.text.textContent += event.text;
        break;
      case "tool_call":
        this.add(task, el("div", { class: "tool-call" },
          el("span", { class: "tool", text: `→ ${event.tool_name}` }),
          el("pre", { text: pretty(event.args) })));
        break;
      case "tool_result":
        this.add(task, el("div", { class: event.ok ? "tool-result" : "tool-result bad" },
          el("span", { class: "tool", text: `${event.ok ? "✓" : "✗"} ${event.tool_name}` }),
          el("pre", { text: event.output })));
        this.closeConfirms(task, "answered");
        break;
      case "tool_skipped":
        this.add(task, el("div", { class: "note warn", text: `${event.tool_name} not run: ${event.reason}` }));
        this.closeConfirms(task, "answered");
        break;
      case "confirm":
        this.add(task, confirmCard(this.sessionId, hash, event));
        break;
      case "pending":
        this.add(task, questionsCard(this.sessionId, hash, event.questions));
        this.setState(task, "parked");
        refreshPending();
        break;
      case "steer_injected":
        this.add(task, el("div", { class: "note", text: `steer: ${event.text}` }));
        break;
      case "leg_started":
        this.add(task, el("div", { class: "note", text: `${event.queued ? "queued" : "started"} ${event.leg_id}: ${event.label}` }));
        refreshLegs();
        break;
      case "leg_report":
        this.add(task, el("pre", { class: "report", text: event.text }));
        break;
      case "leg_finished":
        this.add(task, el("div", { class: "note", text: `${event.leg_id} ${event.status}` },
          el("pre", { text: event.result })));
        refreshLegs();
        break;
      case "job_settled":
        this.add(task, el("div", { class: "note", text: `${event.job_id} settled` }));
        refreshLegs();
        break;
      case "canceled":
        this.add(task, el("div", { class: "note warn", text: `canceled (${event.cause})${event.kept ? ": kept, resumable from Pending" : ""}` }));
        this.setState(task, event.cause === "paused" ? "paused" : "canceled");
        refreshPending();
        break;
      case "failed":
        this.add(task, el("div", { class: "note error", text: `failed: ${event.error}` }));
        this.setState(task, "failed");
        break;
      case "done": {
        const last = task.body.lastElementChild;
        if (last && last.classList.contains("assistant")) last.textContent = event.text;
        else this.add(task, el("div", { class: "assistant", text: event.text }));
        this.setState(task, "finished");
        break;
      }
      default:
        this.add(task, el("div", { class: "note", text: `${event.kind}` }));
    }
  }

  closeConfirms(task, why) {
    for (const card of task.body.querySelectorAll(".confirm[data-open]")) closeCard(card, why);
  }
}

/** Disable a confirmation or question card and say why. The page's own answer
 *  (`mine`) names what was chosen, so it replaces a guess made from the event stream,
 *  which may arrive before the answer's HTTP reply does. */
function closeCard(card, why, mine = false) {
  if (!card.hasAttribute("data-open") && !mine) return;
  card.removeAttribute("data-open");
  for (const control of card.querySelectorAll("button, input")) control.disabled = true;
  card.querySelector(".outcome").textContent = why;
}

/** Approve / Deny (with reason) / Cancel task / Abort task for one `confirm` event. */
function confirmCard(sessionId, taskHash, event) {
  const reason = el("input", { class: "reason", placeholder: "reason (sent to the model)", "aria-label": "Deny reason" });
  const password = event.restricted
    ? el("input", { class: "password", type: "password", placeholder: "system password", "aria-label": "System password" })
    : null;
  const outcome = el("div", { class: "outcome", role: "status" });
  const card = el(
    "div",
    { class: "confirm", "data-open": true, "data-confirm": event.confirm_hash },
    el("div", { class: "confirm-title", text: `Allow ${event.tool_name}?${event.restricted ? " (restricted path)" : ""}` }),
    el("pre", { text: pretty(event.args) }),
    password,
    el("div", { class: "buttons" },
      button("Approve", "approve", () => answer({ approve: true }, "approved")),
      button("Allow this turn", "allow-turn", () => answer({ approve: true, allow_turn: true }, "approved for this turn")),
      button("Always allow", "remember", () => answer({ approve: true, remember: true }, "approved and remembered")),
      button("Deny", "deny", () => answer({ approve: false, reason: reason.value }, "denied")),
      reason,
    ),
    el("div", { class: "buttons" },
      button("Cancel task", "cancel-in-confirm", () => answer({ approve: false, action: "cancel_task" }, "task canceled")),
      button("Abort task", "abort-in-confirm", () => answer({ approve: false, action: "abort_task" }, "task aborted (kept resumable)")),
    ),
    outcome,
  );
  async function answer(body, done) {
    if (password && body.approve) body.password = password.value;
    try {
      await api("POST", `${sessionPath(sessionId)}/confirm/${event.confirm_hash}`, body);
      closeCard(card, done, true);
    } catch (error) {
      if (error.status === 410) closeCard(card, "already answered or gone");
      else outcome.textContent = `failed: ${error.message}`;
    }
  }
  return card;
}

/** A form for saved questions: option buttons, checkboxes (multi), text or secret
 *  fields. A single one-choice question answers on click; otherwise "Send answers". */
function questionForm(questions, submit) {
  const values = questions.map(() => null);
  const form = el("div", { class: "question-form" });
  const single = questions.length === 1 && questions[0].options.length && !questions[0].multi;
  questions.forEach((question, index) => {
    const row = el("div", { class: "question" }, el("div", { class: "question-text", text: question.text }));
    if (question.options.length && question.multi) {
      const picked = new Set();
      values[index] = () => [...picked].join(", ");
      for (const option of question.options) {
        const box = el("input", { type: "checkbox", onchange: () => (box.checked ? picked.add(option) : picked.delete(option)) });
        row.append(el("label", { class: "option" }, box, option));
      }
    } else if (question.options.length) {
      let chosen = "";
      values[index] = () => chosen;
      const buttons = question.options.map((option) =>
        button(option, "option", () => {
          chosen = option;
          for (const other of buttons) other.classList.toggle("chosen", other.dataset.option === option);
          if (single) submit([option]);
        }, { "data-option": option }));
      row.append(el("div", { class: "buttons" }, ...buttons));
    } else {
      const input = el("input", { type: question.secret ? "password" : "text", "aria-label": question.text, class: "answer" });
      values[index] = () => input.value;
      row.append(input);
    }
    form.append(row);
  });
  if (!single) {
    form.append(button("Send answers", "send-answers", () => submit(values.map((get) => get()))));
  }
  return form;
}

/** The `pending` event's questions, answered in place: resume with `answers`. */
function questionsCard(sessionId, taskHash, questions) {
  const outcome = el("div", { class: "outcome", role: "status" });
  const card = el("div", { class: "questions", "data-open": true, "data-task": taskHash });
  card.append(
    el("div", { class: "confirm-title", text: "The task asks:" }),
    questionForm(questions, async (answers) => {
      try {
        await api("POST", `${sessionPath(sessionId)}/task/${taskHash}/resume`, { answers });
        closeCard(card, `answered: ${answers.join(" | ")}`, true);
        refreshPending();
      } catch (error) {
        outcome.textContent = `failed: ${error.message}`;
      }
    }),
    outcome,
  );
  return card;
}

// ------------------------------------------------------------------ side panels

async function refreshPending() {
  if (!view) return;
  const sessionId = view.sessionId;
  const list = $("pending-list");
  let data;
  try {
    data = await api("GET", `${sessionPath(sessionId)}/task`);
  } catch (error) {
    list.replaceChildren(el("li", { class: "error", text: error.message }));
    return;
  }
  if (view?.sessionId !== sessionId) return;
  list.replaceChildren();
  if (!data.tasks.length) list.append(el("li", { class: "muted", text: "No pending tasks." }));
  for (const task of data.tasks) {
    const outcome = el("div", { class: "outcome", role: "status" });
    const resume = async (answers) => {
      try {
        await api("POST", `${sessionPath(sessionId)}/task/${task.task_hash}/resume`, answers ? { answers } : {});
        refreshPending();
      } catch (error) {
        outcome.textContent = `resume failed: ${error.message}`;
      }
    };
    const drop = async () => {
      try {
        await api("DELETE", `${sessionPath(sessionId)}/task/${task.task_hash}`);
        refreshPending();
      } catch (error) {
        outcome.textContent = `drop failed: ${error.message}`;
      }
    };
    list.append(
      el("li", { class: "card", "data-task": task.task_hash },
        el("div", { class: "card-title", text: task.objective }),
        el("div", { class: "muted", text: `task ${short(task.task_hash)} · ${clock(task.updated_at)}${task.has_jobs ? " · background jobs" : ""}` }),
        task.has_questions ? questionForm(task.questions, resume) : null,
        el("div", { class: "buttons" },
          task.has_questions ? null : button("Resume", "resume", () => resume(null)),
          button("Drop", "drop", drop)),
        outcome),
    );
  }
}

async function refreshLegs() {
  if (!view) return;
  const sessionId = view.sessionId;
  const list = $("legs-list");
  let data;
  try {
    data = await api("GET", `${sessionPath(sessionId)}/legs`);
  } catch (error) {
    list.replaceChildren(el("li", { class: "error", text: error.message }));
    return;
  }
  if (view?.sessionId !== sessionId) return;
  list.replaceChildren();
  if (!data.legs.length) list.append(el("li", { class: "muted", text: "No background legs running." }));
  const cancel = async (legId) => {
    try {
      await api("POST", `${sessionPath(sessionId)}/legs/${legId}/cancel`);
    } catch (error) {
      list.append(el("li", { class: "error", text: `cancel failed: ${error.message}` }));
    }
    refreshLegs();
  };
  for (const leg of data.legs) {
    list.append(
      el("li", { class: "card", "data-leg": leg.leg_id },
        el("div", { class: "card-title", text: leg.label }),
        el("div", { class: "muted", text: `${leg.leg_id} · ${leg.state} · task ${short(leg.task_hash)} · ${clock(leg.started_at)}` }),
        button("Cancel", "cancel-leg", () => cancel(leg.leg_id))),
    );
  }
  if (data.legs.length > 1) list.append(el("li", {}, button("Cancel all", "cancel-all-legs", () => cancel("all"))));
}

async function searchHistory() {
  if (!view) return;
  const sessionId = view.sessionId;
  const keyword = $("history-keyword").value.trim();
  const list = $("history-list");
  const record = $("history-record");
  record.hidden = true;
  let data;
  try {
    data = await api("GET", `${sessionPath(sessionId)}/task/history?${new URLSearchParams({ keyword, limit: "50" })}`);
  } catch (error) {
    list.replaceChildren(el("li", { class: "error", text: error.message }));
    return;
  }
  list.replaceChildren();
  if (!data.tasks.length) list.append(el("li", { class: "muted", text: "No tasks found." }));
  for (const entry of data.tasks) {
    list.append(
      el("li", { class: "card", "data-task": entry.task_hash },
        el("div", { class: "card-title", text: entry.objective }),
        el("div", { class: "muted", text: `${entry.status} · ${clock(entry.end_at)} · ${entry.model}` }),
        button("Show record", "show-record", async () => {
          try {
            const found = await api("GET", `${sessionPath(sessionId)}/task/${entry.task_hash}/history`);
            record.textContent = found.content;
          } catch (error) {
            record.textContent = `failed: ${error.message}`;
          }
          record.hidden = false;
        })),
    );
  }
}

function showTab(name) {
  for (const tab of document.querySelectorAll("[data-tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.tab === name));
  }
  for (const panel of ["pending", "legs", "history"]) $(`panel-${panel}`).hidden = panel !== name;
  if (name === "pending") refreshPending();
  if (name === "legs") refreshLegs();
  if (name === "history") searchHistory();
}

// ------------------------------------------------------------------ wiring

let view = null;

function select(sessionId) {
  view?.close();
  remember(sessionId);
  localStorage.setItem(CURRENT_KEY, sessionId);
  view = new ChatView(sessionId);
  renderSessions();
  refreshPending();
  refreshLegs();
  $("history-list").replaceChildren();
  $("history-record").hidden = true;
  $("input").focus();
}

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN_KEY);
  view?.close();
  view = null;
  $("app").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("token").value = "";
  $("token").focus();
}

function signIn() {
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = false;
  const saved = localStorage.getItem(CURRENT_KEY);
  select(saved && SESSION_ID.test(saved) ? saved : knownSessions()[0] || newSessionId());
}

async function send() {
  const input = $("input");
  const text = input.value;
  if (!view || !text.trim()) return;
  $("send-error").textContent = "";
  try {
    await api("POST", "/v1/send", { session_id: view.sessionId, input: text });
    input.value = "";
  } catch (error) {
    $("send-error").textContent = `send failed: ${error.message}`;
  }
}

async function health() {
  try {
    const response = await fetch("/v1/health", { cache: "no-store", credentials: "omit" });
    const data = await response.json();
    $("daemon-status").textContent = `daemon ${data.version} · ${data.tasks} task(s) · ${data.legs} leg(s)`;
  } catch {
    $("daemon-status").textContent = "daemon unreachable";
  }
}

function main() {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    $("token").value = "";
    signIn();
  });
  $("logout").addEventListener("click", () => signOut());
  $("new-session").addEventListener("click", () => select(newSessionId()));
  $("open-session").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("open-session-id").value.trim();
    if (!SESSION_ID.test(id)) {
      $("open-session-error").textContent = "A web session id is chat- followed by letters, digits, _ or -.";
      return;
    }
    $("open-session-error").textContent = "";
    $("open-session-id").value = "";
    select(id);
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  $("history-form").addEventListener("submit", (event) => {
    event.preventDefault();
    searchHistory();
  });
  $("pending-refresh").addEventListener("click", refreshPending);
  $("legs-refresh").addEventListener("click", refreshLegs);
  for (const tab of document.querySelectorAll("[data-tab]")) {
    tab.addEventListener("click", () => showTab(tab.dataset.tab));
  }
  health();
  setInterval(health, 10000);
  if (token()) signIn();
  else signOut();
}

main();
