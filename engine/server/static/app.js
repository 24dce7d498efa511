// agentrio web dashboard: the `chat-` origin's front-end (SPEC R4, R8, §7).
//
// Plain ES module, no build step, no dependencies. Security rules this file keeps:
// - The token lives in sessionStorage (this tab only) and travels only as an
//   `Authorization: Bearer` header; there are no cookies, so no other origin can ride
//   a session (CSRF), and the token never appears in a URL or a log.
// - Events stream with fetch() + a ReadableStream reader of the SSE format, because
//   EventSource cannot send headers.
// - Every piece of daemon or event text reaches the page through textContent (the
//   `el` helper appends strings as text nodes); innerHTML is never used. The model's
//   Markdown is parsed into plain data (parseMarkdown) and built as elements holding
//   text nodes, so markup in model text stays text; invisible characters in it show as
//   escapes, by the confirmation's rule (R77).
// - Every action is worded as in the REPL (the `wording` section, protocol/wording.py).

const TOKEN_KEY = "agentrio.token";
const SESSIONS_KEY = "agentrio.sessions";
const HIDDEN_KEY = "agentrio.sessions.hidden";
/** How near the bottom (px) still counts as at the bottom for following output. */
const FOLLOW_SLACK_PX = 24;
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

// ---- faithful: begin ------------------------------------------------------------
// A confirmation's tool arguments drawn faithfully (R77): the same rules as
// protocol/faithful.py (read its docstring), so the page and the REPL show one truth;
// tests/protocol/test_faithful.py runs this section under node on one table of inputs and
// compares it with the Python. Pure: no DOM. A piece is [kind, text, source]: kind
// "text" | "escape" | "mark" | "key", source = characters of the original it stands for.

/** Code points shown as an escape (inclusive, sorted): INVISIBLE_RANGES of
 *  protocol/faithful.py, which says what each range is. */
const INVISIBLE_RANGES = [
  [0x0000, 0x0009],
  [0x000B, 0x001F],
  [0x007F, 0x00A0],
  [0x00AD, 0x00AD],
  [0x034F, 0x034F],
  [0x0600, 0x0605],
  [0x061C, 0x061C],
  [0x06DD, 0x06DD],
  [0x070F, 0x070F],
  [0x0890, 0x0891],
  [0x08E2, 0x08E2],
  [0x115F, 0x1160],
  [0x1680, 0x1680],
  [0x17B4, 0x17B5],
  [0x180B, 0x180F],
  [0x2000, 0x200F],
  [0x2028, 0x202F],
  [0x205F, 0x206F],
  [0x2800, 0x2800],
  [0x3000, 0x3000],
  [0x3164, 0x3164],
  [0xD800, 0xF8FF],
  [0xFE00, 0xFE0F],
  [0xFEFF, 0xFEFF],
  [0xFFA0, 0xFFA0],
  [0xFFF9, 0xFFFB],
  [0x110BD, 0x110BD],
  [0x110CD, 0x110CD],
  [0x13430, 0x1343F],
  [0x1BCA0, 0x1BCA3],
  [0x1D173, 0x1D17A],
  [0xE0001, 0xE0001],
  [0xE0020, 0xE007F],
  [0xE0100, 0xE01EF],
  [0xF0000, 0xFFFFD],
  [0x100000, 0x10FFFD]
];
const SPACE_RUN = 8;
const NEWLINE_MARK = "⏎";
const NAMED_ESCAPES = { "\t": "\\t", "\r": "\\r", "\n": "\\n" };

function isInvisible(code) {
  let low = 0;
  let high = INVISIBLE_RANGES.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const [start, end] = INVISIBLE_RANGES[middle];
    if (code < start) high = middle - 1;
    else if (code > end) low = middle + 1;
    else return true;
  }
  return false;
}

function escapeChar(char) {
  if (char in NAMED_ESCAPES) return NAMED_ESCAPES[char];
  const code = char.codePointAt(0);
  if (code < 0x100) return `\\x${code.toString(16).padStart(2, "0")}`;
  if (code < 0x10000) return `\\u${code.toString(16).padStart(4, "0")}`;
  return `\\U${code.toString(16).padStart(8, "0")}`;
}

function spacesMark(count) {
  return ["mark", `⟨${count} space${count !== 1 ? "s" : ""}⟩`, count];
}

/** The pieces of one line (a "\n" in it shows as an escape if `escapeNewlines`). */
function linePieces(line, escapeNewlines = false) {
  const chars = Array.from(line);
  const pieces = [];
  let text = [];
  const flush = () => {
    if (text.length) pieces.push(["text", text.join(""), text.length]);
    text = [];
  };
  let index = 0;
  while (index < chars.length) {
    const char = chars[index];
    if (char === " ") {
      let stop = index;
      while (stop < chars.length && chars[stop] === " ") stop += 1;
      const count = stop - index;
      if (count >= SPACE_RUN || stop === chars.length) {
        flush();
        pieces.push(spacesMark(count));
      } else {
        for (let i = 0; i < count; i += 1) text.push(" ");
      }
      index = stop;
      continue;
    }
    if (isInvisible(char.codePointAt(0)) || (escapeNewlines && char === "\n")) {
      flush();
      pieces.push(["escape", escapeChar(char), 1]);
    } else {
      text.push(char);
    }
    index += 1;
  }
  flush();
  return pieces;
}

/** `text` as one line of unstyled characters, shown faithfully: newlines and
 *  invisible characters as ⟨\u202e⟩-style escapes (protocol/faithful.py ``one_line``). */
function oneLine(text) {
  const marked = (piece) => {
    if (piece[0] === "escape") return `⟨${piece[1]}⟩`;
    if (piece[0] !== "text") return piece[1];
    return Array.from(piece[1]).map((c) => ("⟨⟩⏎".includes(c) ? `⟨${escapeChar(c)}⟩` : c)).join("");
  };
  return linePieces(text, true).map(marked).join("");
}

/** A string as numbered lines (no number when it is one line). */
function textLines(value) {
  const parts = value.split("\n");
  const numbered = parts.length > 1;
  return parts.map((part, index) => {
    const pieces = linePieces(part);
    if (index < parts.length - 1) pieces.push(["mark", NEWLINE_MARK, 1]);
    return { label: numbered ? String(index + 1) : "", pieces };
  });
}

/** A JSON string as Python's json.dumps(ensure_ascii=False) writes it. */
function pyJsonString(text) {
  const named = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };
  let out = '"';
  for (const char of text) {
    if (char in named) out += named[char];
    else if (char.codePointAt(0) < 0x20) out += `\\u${char.codePointAt(0).toString(16).padStart(4, "0")}`;
    else out += char;
  }
  return `${out}"`;
}

/** JSON as Python's json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).
 *  (A float with an integral value reads as an int here: JSON.parse lost the ".0".) */
function pyJson(value) {
  if (value === null) return "null";
  if (typeof value === "string") return pyJsonString(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  return `{${Object.entries(value).map(([k, v]) => `${pyJsonString(k)}: ${pyJson(v)}`).join(", ")}}`;
}

/** Every argument of a tool call as lines [{label, pieces}]: protocol/faithful.py's
 *  faithful_lines. */
function faithfulLines(args) {
  const names = Object.keys(args);
  names.sort((a, b) => (a === "command" ? 0 : 1) - (b === "command" ? 0 : 1));
  if (names.length === 1 && names[0] === "command" && typeof args.command === "string") {
    return textLines(args.command);
  }
  const lines = [];
  for (const name of names) {
    const value = args[name];
    const head = ["key", linePieces(String(name), true).map((piece) => piece[1]).join(""), 0];
    if (typeof value === "string" && value.includes("\n")) {
      const count = value.split("\n").length;
      lines.push({ label: "", pieces: [head, ["key", `: (${count} lines)`, 0]] });
      lines.push(...textLines(value));
    } else if (typeof value === "string") {
      lines.push({ label: "", pieces: [head, ["key", ": ", 0], ...linePieces(value)] });
    } else if (Array.isArray(value) && value.length && value.every((w) => typeof w === "string")) {
      const words = `${value.length} word${value.length !== 1 ? "s" : ""}`;
      lines.push({ label: "", pieces: [head, ["key", `: (argv, ${words})`, 0]] });
      value.forEach((word, index) => lines.push({ label: `[${index}]`, pieces: linePieces(word, true) }));
    } else {
      lines.push({ label: "", pieces: [head, ["key", ": ", 0], ...linePieces(pyJson(value), true)] });
    }
  }
  return lines;
}

/** A file change's diff as lines: protocol/faithful.py's diff_lines (each line's
 *  marker in the gutter, its text escaped; "\\ No newline at end of file" a mark). */
function diffLines(diff) {
  const parts = diff.split("\n");
  if (diff.endsWith("\n")) parts.pop();
  return parts.map((line) => {
    if (line.startsWith("@@")) return { label: "@@", pieces: [["key", line.slice(2).trim(), 0]] };
    if (line.startsWith("\\")) return { label: "", pieces: [["mark", line, 0]] };
    return { label: line.slice(0, 1), pieces: linePieces(line.slice(1)) };
  });
}

/** What a confirmation shows: protocol/faithful.py's confirm_lines (the arguments,
 *  then a file change's diff and the directory an edits rule would cover; a call met
 *  again after its task stopped while it ran is led by an "interrupted:" line). */
function confirmLines(args, change, interrupted = "") {
  const lines = faithfulLines(args);
  if (interrupted) {
    const said = linePieces(interrupted, true).map(([kind, text]) => [kind, text, 0]);
    lines.unshift({ label: "", pieces: [["key", "interrupted: ", 0], ...said] });
  }
  if (!change) return lines;
  const count = `+${change.added} -${change.removed} lines${change.created ? ", a new file" : ""}`;
  lines.push({ label: "", pieces: [["key", `diff (${count}):`, 0]] });
  lines.push(...diffLines(change.diff));
  if (change.rule_dir) {
    lines.push({ label: "", pieces: [["key", "this directory: ", 0], ...linePieces(change.rule_dir, true)] });
  }
  return lines;
}
// ---- faithful: end --------------------------------------------------------------

// ---- wording: begin -------------------------------------------------------------
// The words of every action, as protocol/wording.py has them (read its docstring): a
// person who learns "Stop and discard" in the REPL reads the same words here.
// tests/engine/server/test_static_page.py checks every label of protocol.wording is
// spelled here and runs confirmTitle and endedLine under node against the Python. Pure.

const APPROVE = "Approve";
const DENY = "Deny with reason";
const ALWAYS_ALLOW = "Always allow this exact command in this directory";
const ALLOW_TURN = "Allow this turn: plain programs only (no shell, interpreter code, sudo or restricted path)";
const STOP_DISCARD = "Stop and discard";
const STOP_KEEP = "Stop, keep to resume";
const ALWAYS_ALLOW_RULE = "Always allow";
const RESTRICTED_ELSEWHERE = "restricted path: the system password is asked only in the REPL; run this from the REPL (agentrio) instead";
// The page has no Esc popup; kept so this twin of protocol/wording.py is whole.
const ESC_KEEP_RUNNING = "Keep running";

/** The choice of a rule a confirmation offers (R92): wording.offer_label. */
function offerLabel(covers) {
  return `${ALWAYS_ALLOW_RULE} ${covers}`;
}

/** The first line of a confirmation: wording.confirm_title. */
function confirmTitle(toolName, restricted = false) {
  const tail = restricted ? " (restricted path: needs the system password)" : "";
  return `Allow ${toolName}?${tail}`;
}

/** "1 task", "2 tasks": wording.plural. */
function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/** What a stop ended (a CancelResult's ``stopped``), in the words of protocol/wording.py
 * ``stop_receipt_line`` (issue 34 item 4). */
function stopReceiptLine(receipt) {
  const parts = [];
  const legs = receipt.legs ?? [];
  if (legs.length) parts.push(`${plural(legs.length, "background leg")} (${legs.map((leg) => leg.leg_id).join(", ")})`);
  if (receipt.subagents?.length) parts.push(plural(receipt.subagents.length, "sub-agent"));
  if (receipt.mcp_calls?.length) parts.push(plural(receipt.mcp_calls.length, "MCP call"));
  if (receipt.asks_withdrawn?.length) parts.push(`${plural(receipt.asks_withdrawn.length, "ask")} withdrawn`);
  if (receipt.process_groups?.length) parts.push(plural(receipt.process_groups.length, "process group"));
  let line = parts.length ? `■ ended with it: ${parts.join(", ")}` : "■ nothing else was running";
  if (receipt.left_running?.length) line += `; left running: ${receipt.left_running.map((leg) => leg.leg_id).join(", ")}`;
  if (receipt.still_alive?.length) return `${line} — still alive: process group ${receipt.still_alive.join(", ")}`;
  return parts.length ? `${line} — nothing left running` : line;
}

/** The card of a stop's receipt: its line, and what it ended, one item each (the
 * process groups of each leg, the sub-agents by label, the asks by id). */
function stopReceiptCard(receipt) {
  const items = [
    ...(receipt.legs ?? []).map((leg) => `${leg.leg_id} ${leg.kind} ${leg.status}: ${leg.label}` +
      (leg.process_groups?.length ? ` (process groups ${leg.process_groups.join(", ")})` : "")),
    ...(receipt.subagents ?? []).map((label) => `sub-agent ${label}`),
    ...(receipt.mcp_calls ?? []).map((name) => `MCP call ${name}`),
    ...(receipt.asks_withdrawn ?? []).map((id) => `ask ${short(id)} withdrawn`),
    ...(receipt.process_groups?.length ? [`process groups ${receipt.process_groups.join(", ")}`] : []),
    `${plural(receipt.still_alive?.length ?? 0, "process group")} alive afterwards`,
  ];
  const bad = receipt.still_alive?.length ? " bad" : "";
  return el("div", { class: `stop-receipt${bad}` },
    el("div", { class: "stop-receipt-line", text: stopReceiptLine(receipt) }),
    el("ul", {}, ...items.map((text) => el("li", { text }))));
}

/** A ``compacted`` event, in the words of protocol/wording.py ``compacted_line``. */
function compactedLine(summarised, elided, subagent = "") {
  const parts = [];
  if (summarised) parts.push(`${plural(summarised, "earlier exchange")} summarised`);
  if (elided) parts.push(`${plural(elided, "older tool result")} left out`);
  return forSubagent(subagent, "⟲ ", `conversation compacted: ${parts.join(", ") || "nothing to fold"}`);
}

/** protocol/wording.py ``for_subagent``: an in-process sub-agent's line names it first. */
function forSubagent(subagent, mark, line) {
  return subagent ? `${mark}[${subagent}] ${line}` : `${mark}${line}`;
}

/** A ``retrying`` event, in the words of protocol/wording.py ``retrying_line``. */
function retryingLine(reason, delaySeconds, subagent = "") {
  if (delaySeconds <= 0) return forSubagent(subagent, "↻ ", reason);
  const shown = delaySeconds < 1 ? "<1" : String(Math.ceil(delaySeconds));
  return forSubagent(subagent, "↻ ", `${reason}, retrying in ${shown} s`);
}

/** An ``agents_md`` event, in the words of protocol/wording.py ``agents_md_line``. */
function agentsMdLine(paths) {
  return `≡ instructions read from ${paths.join(", ")}`;
}

/** A ``done`` event's usage, in the words of protocol/wording.py ``usage_line``. */
function usageLine(usage) {
  const cached = usage.cached_input_tokens ? ` (${usage.cached_input_tokens} cached)` : "";
  const cost = usage.cost_usd ? ` · $${usage.cost_usd.toFixed(4)}` : "";
  return `tokens: ${usage.input_tokens} in${cached}, ${usage.output_tokens} out${cost}`;
}

/** A task's state as its badge says it to a person (``data-state`` keeps the name). */
const STATE_WORDS = {
  running: "running",
  parked: "waits for your answer",
  paused: "paused, kept",
  canceled: "stopped",
  failed: "failed",
  failed_kept: "failed, kept",
  finished: "finished",
};

/** How a run that did not finish ended: wording.ended_line. */
function endedLine(status, reason = "") {
  const why = reason ? `: ${reason}` : "";
  switch (status) {
    case "user_canceled":
    case "canceled":
      return "✗ stopped and discarded";
    case "paused":
      return "‖ paused — kept: resume it with /pending";
    case "aborted":
    case "user_aborted":
      return `‖ stopped${why} — kept: resume it with /pending`;
    case "disconnected":
      return "‖ stopped (window closed) — kept: resume it with /pending";
    case "parked":
      return "? waits for answers — answer it with /pending";
    case "failed":
      return `✗ failed${why || ": unknown error"}`;
    case "failed_kept":
      return `✗ failed${why || ": unknown error"} — kept: resume it with /pending`;
    case "shutdown":
      return "‖ stopped (daemon shut down) — kept: resume it with /pending";
  }
  return `‖ stopped (${status})${why} — kept: resume it with /pending`;
}
// ---- wording: end ---------------------------------------------------------------

// ---- markdown: begin ------------------------------------------------------------
// The model's Markdown, parsed into plain data (no DOM, no HTML): fenced code blocks,
// headings, bullet and numbered lists, block quotes, rules and paragraphs; inside them
// inline code, bold (** or __) and emphasis (* or _). Anything else (links, tables,
// HTML) stays text as written. `markdownNodes` below builds the DOM from this with
// text nodes only. tests/engine/server/test_static_page.py runs this section under node.
//
// A block is {kind: "code", info, text} | {kind: "heading", level, inline} |
// {kind: "list", ordered, items: [{depth, number, inline}]} | {kind: "quote", inline}
// | {kind: "rule"} | {kind: "para", inline}; an inline is a list of ["text", string]
// | ["code", string] | ["strong", inline] | ["em", inline].

const MD_FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const MD_HEADING = /^ {0,3}(#{1,6})[ \t]+(\S.*)$/;
const MD_RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const MD_BULLET = /^( *)([-*+])[ \t]+(.*)$/;
const MD_NUMBER = /^( *)(\d{1,9})([.)])[ \t]+(.*)$/;
const MD_QUOTE = /^ {0,3}> ?(.*)$/;

function mdOpensFence(line) {
  const found = MD_FENCE.exec(line);
  if (!found || (found[1][0] === "`" && found[2].includes("`"))) return null;
  return { fence: found[1], info: found[2].trim() };
}

function mdItem(line) {
  const bullet = MD_BULLET.exec(line);
  if (bullet) return { ordered: false, indent: bullet[1].length, number: 0, text: bullet[3] };
  const number = MD_NUMBER.exec(line);
  if (number) return { ordered: true, indent: number[1].length, number: Number(number[2]), text: number[4] };
  return null;
}

/** Does `line` start a block other than a paragraph? */
function mdStartsBlock(line) {
  return Boolean(mdOpensFence(line) || MD_HEADING.test(line) || MD_RULE.test(line) || mdItem(line) || MD_QUOTE.test(line));
}

/** The blocks of `text` (an unclosed fence runs to the end: text still streaming). */
function parseMarkdown(text) {
  const lines = text.split("\n");
  const blocks = [];
  let index = 0;
  while (index < lines.length) {
    const line = lines[index];
    const fence = mdOpensFence(line);
    if (fence) {
      const body = [];
      index += 1;
      while (index < lines.length) {
        const close = lines[index].trim();
        if (close.length >= fence.fence.length && close === close[0].repeat(close.length) && close[0] === fence.fence[0]) break;
        body.push(lines[index]);
        index += 1;
      }
      index += 1;
      blocks.push({ kind: "code", info: fence.info, text: body.join("\n") });
      continue;
    }
    if (!line.trim()) {
      index += 1;
      continue;
    }
    const heading = MD_HEADING.exec(line);
    if (heading) {
      blocks.push({ kind: "heading", level: heading[1].length, inline: parseInline(heading[2].trimEnd()) });
      index += 1;
      continue;
    }
    if (MD_RULE.test(line)) {
      blocks.push({ kind: "rule" });
      index += 1;
      continue;
    }
    if (mdItem(line)) {
      index = mdList(lines, index, blocks);
      continue;
    }
    if (MD_QUOTE.test(line)) {
      const quoted = [];
      while (index < lines.length && MD_QUOTE.test(lines[index])) quoted.push(MD_QUOTE.exec(lines[index++])[1]);
      blocks.push({ kind: "quote", inline: parseInline(quoted.join("\n")) });
      continue;
    }
    const para = [line];
    index += 1;
    while (index < lines.length && lines[index].trim() && !mdStartsBlock(lines[index])) para.push(lines[index++]);
    blocks.push({ kind: "para", inline: parseInline(para.join("\n")) });
  }
  return blocks;
}

/** One list from lines[index] on (items of one kind; a following line that starts no
 *  block continues the item above it); the index after it. */
function mdList(lines, index, blocks) {
  const first = mdItem(lines[index]);
  const items = [];
  let item = null;
  while (index < lines.length) {
    const line = lines[index];
    const next = mdItem(line);
    if (next && next.ordered === first.ordered) {
      item = { depth: Math.min(3, Math.floor(next.indent / 2)), number: next.number, text: [next.text] };
      items.push(item);
    } else if (!next && line.trim() && !mdStartsBlock(line)) {
      item.text.push(line.trim());
    } else if (!line.trim() && index + 1 < lines.length && mdItem(lines[index + 1])?.ordered === first.ordered) {
      // a blank line between two items of the list
    } else {
      break;
    }
    index += 1;
  }
  blocks.push({
    kind: "list",
    ordered: first.ordered,
    items: items.map((it) => ({ depth: it.depth, number: it.number, inline: parseInline(it.text.join("\n")) })),
  });
  return index;
}

const MD_WORD = /[\p{L}\p{N}]/u;
const mdSpace = (char) => char === undefined || /\s/.test(char);
const mdWord = (char) => char !== undefined && MD_WORD.test(char);

/** The end of the emphasis opened by `mark` ("*", "_", "**" or "__") at `start`, or -1:
 *  the opening is followed and the closing preceded by a non-space, "_" never opens or
 *  closes inside a word, and a single mark does not close on a double one. */
function mdCloser(text, start, mark) {
  const open = start + mark.length;
  if (mdSpace(text[open]) || text[open] === mark[0]) return -1;
  if (mark[0] === "_" && mdWord(text[start - 1])) return -1;
  let at = text.indexOf(mark, open + 1);
  while (at >= 0) {
    const after = text[at + mark.length];
    const doubled = mark.length === 1 && (after === mark || text[at - 1] === mark);
    if (!mdSpace(text[at - 1]) && !doubled && !(mark[0] === "_" && mdWord(after))) return at;
    at = text.indexOf(mark, at + 1);
  }
  return -1;
}

/** The inline pieces of `text`. */
function parseInline(text) {
  const out = [];
  let plain = "";
  const push = (piece) => {
    if (plain) out.push(["text", plain]);
    plain = "";
    out.push(piece);
  };
  let index = 0;
  while (index < text.length) {
    const char = text[index];
    if (char === "`") {
      let run = 1;
      while (text[index + run] === "`") run += 1;
      const ticks = "`".repeat(run);
      let end = text.indexOf(ticks, index + run);
      while (end >= 0 && text[end + run] === "`") {
        let skip = end;
        while (text[skip] === "`") skip += 1;
        end = text.indexOf(ticks, skip);
      }
      if (end > index + run) {
        push(["code", text.slice(index + run, end)]);
        index = end + run;
      } else {
        plain += ticks;
        index += run;
      }
      continue;
    }
    if (char === "*" || char === "_") {
      const mark = text[index + 1] === char ? char + char : char;
      const end = mdCloser(text, index, mark);
      if (end >= 0) {
        push([mark.length === 2 ? "strong" : "em", parseInline(text.slice(index + mark.length, end))]);
        index = end + mark.length;
        continue;
      }
      plain += mark;
      index += mark.length;
      continue;
    }
    plain += char;
    index += 1;
  }
  if (plain) out.push(["text", plain]);
  return out;
}
// ---- markdown: end --------------------------------------------------------------

/** `text` as nodes: every invisible character (isInvisible: the confirmation's rule,
 *  R77) shows as its escape in a marked span, so rendering never hides one; a tab stays
 *  a tab inside code when `tabs`. Strings become text nodes, never markup. */
function visibleNodes(text, tabs = false) {
  const nodes = [];
  let plain = "";
  for (const char of text) {
    if (isInvisible(char.codePointAt(0)) && !(tabs && char === "\t")) {
      if (plain) nodes.push(plain);
      plain = "";
      nodes.push(el("span", { class: "escape", text: escapeChar(char) }));
    } else {
      plain += char;
    }
  }
  if (plain) nodes.push(plain);
  return nodes;
}

function inlineNodes(pieces) {
  return pieces.flatMap(([kind, value]) => {
    if (kind === "text") return visibleNodes(value);
    if (kind === "code") return [el("code", {}, ...visibleNodes(value, true))];
    return [el(kind === "strong" ? "strong" : "em", {}, ...inlineNodes(value))];
  });
}

/** The DOM of the model's Markdown `text` (parseMarkdown), text nodes only. */
function markdownNodes(text) {
  return parseMarkdown(text).map((block) => {
    switch (block.kind) {
      case "code":
        return el("pre", { class: "md-code", "data-info": block.info || null },
          el("code", {}, ...visibleNodes(block.text, true)));
      case "heading":
        return el(`h${Math.min(block.level + 2, 6)}`, { class: "md-heading" }, ...inlineNodes(block.inline));
      case "list": {
        const list = el(block.ordered ? "ol" : "ul", { start: block.ordered ? block.items[0].number : null });
        for (const item of block.items) {
          list.append(el("li", { class: item.depth ? `depth-${item.depth}` : null, value: block.ordered ? item.number : null },
            ...inlineNodes(item.inline)));
        }
        return list;
      }
      case "quote":
        return el("blockquote", {}, ...inlineNodes(block.inline));
      case "rule":
        return el("hr");
      default:
        return el("p", {}, ...inlineNodes(block.inline));
    }
  });
}

/** Draw an answer's Markdown (`node.markdown`) now. */
function renderAnswer(node) {
  node.renderPending = false;
  node.replaceChildren(...markdownNodes(node.markdown));
}

/** Draw it at the next frame: streamed pieces arriving together render once. */
function renderAnswerSoon(node) {
  if (node.renderPending) return;
  node.renderPending = true;
  requestAnimationFrame(() => {
    if (node.renderPending) renderAnswer(node);
  });
}

/** An end line as the page says it: the REPL's `/pending` is the Pending tab here. */
function pageLine(line) {
  return line.replace(" with /pending", " from the Pending tab");
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
// Issue 34 (R97): the card of an ask is drawn, so tell the daemon: the ask's state says
// "shown on web, acknowledged". A REPL window's ask (403) or one gone is not this page's
// to acknowledge, and nothing else depends on it: failures are ignored.
function acknowledge(sessionId, confirmHash) {
  api("POST", `${sessionPath(sessionId)}/ack/${confirmHash}`, { frontend: "web" }).catch(() => {});
}

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
  localStorage.setItem(HIDDEN_KEY, JSON.stringify(hiddenSessions().filter((k) => k !== id)));
  const list = knownSessions().filter((known) => known !== id);
  list.unshift(id);
  localStorage.setItem(SESSIONS_KEY, JSON.stringify(list));
}

function forget(id) {
  localStorage.setItem(SESSIONS_KEY, JSON.stringify(knownSessions().filter((k) => k !== id)));
  const hidden = hiddenSessions().filter((k) => k !== id);
  hidden.unshift(id);
  localStorage.setItem(HIDDEN_KEY, JSON.stringify(hidden.slice(0, 500)));
}

/** Sessions removed from this browser's list (× on a session the daemon lists). */
function hiddenSessions() {
  try {
    const list = JSON.parse(localStorage.getItem(HIDDEN_KEY) || "[]");
    return Array.isArray(list) ? list.filter((id) => SESSION_ID.test(id)) : [];
  } catch {
    return [];
  }
}

/** The daemon's chat- sessions that started a task (GET /v1/sessions), once fetched. */
let daemonSessions = [];

async function refreshSessions() {
  try {
    const data = await api("GET", `/v1/sessions?${new URLSearchParams({ origin: "chat-" })}`);
    daemonSessions = data.sessions.filter((id) => SESSION_ID.test(id));
  } catch {
    return; // the list this browser remembers still shows
  }
  renderSessions();
}

/** The listed sessions: this browser's, newest first, then the daemon's others. A new
 *  session is listed once something was sent in it, so signing in or "New session"
 *  leaves no empty one behind (issue 33 item 11). */
function listedSessions() {
  const hidden = new Set(hiddenSessions());
  const local = knownSessions();
  const seen = new Set(local);
  return [...local, ...daemonSessions.filter((id) => !seen.has(id) && !hidden.has(id))];
}

function newSessionId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return `chat-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function renderSessions() {
  const list = $("session-list");
  list.replaceChildren();
  for (const id of listedSessions()) {
    const current = view?.sessionId === id;
    list.append(
      el(
        "li",
        { class: current ? "current" : "", "data-session": id },
        button(id, "select-session", () => select(id), { class: "link" }),
        button("×", "forget-session", () => {
          forget(id);
          if (current) select(listedSessions()[0] || newSessionId());
          else renderSessions();
        }, { class: "small quiet", title: "Remove from this list", "aria-label": `Remove ${id} from this list` }),
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
    this.followOutput();
    this.stream();
  }

  /** Keep the chat scrolled to the bottom while output arrives (new blocks, growing
   *  answers, tool output), unless the person scrolled up to read; scrolling back to
   *  the bottom follows again (issue 33 item 11). */
  followOutput() {
    const log = this.log;
    this.following = true;
    log.addEventListener("scroll", this.onScroll = () => {
      this.following = log.scrollHeight - log.scrollTop - log.clientHeight <= FOLLOW_SLACK_PX;
    });
    this.observer = new MutationObserver(() => {
      if (this.following) log.scrollTop = log.scrollHeight;
    });
    this.observer.observe(log, { childList: true, subtree: true, characterData: true });
  }

  close() {
    this.controller.abort();
    this.observer.disconnect();
    this.log.removeEventListener("scroll", this.onScroll);
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
    this.showRecent();
  }

  /** The session's last exchanges from the store (issue 31), drawn first: reopening a
   *  session shows where its conversation stood, also after a daemon restart emptied
   *  its replay. A task the replay shows itself keeps its own block instead. */
  async showRecent() {
    const epoch = (this.epoch = (this.epoch ?? 0) + 1);
    let data;
    try {
      data = await api("GET", `${sessionPath(this.sessionId)}/recent`);
    } catch {
      return; // the live log is whole without them
    }
    if (epoch !== this.epoch || this.controller.signal.aborted) return;
    const blocks = data.exchanges.filter((e) => !this.tasks.has(e.task_hash)).map(earlierBlock);
    this.log.prepend(...blocks);
  }

  /** The block of a task, made on first sight (a replay may begin mid-task). */
  task(hash) {
    let task = this.tasks.get(hash);
    if (task) return task;
    for (const earlier of this.log.querySelectorAll(`.earlier[data-task="${CSS.escape(hash)}"]`)) {
      earlier.remove(); // the replay draws this task whole
    }
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
    // A card waiting for an answer is brought into view even when not following.
    if (!this.following && node.dataset?.open !== undefined) node.scrollIntoView({ block: "nearest" });
    return node;
  }

  setState(task, state) {
    task.state = state;
    task.badge.textContent = STATE_WORDS[state] ?? state;
    task.block.dataset.state = state;
    task.actions.replaceChildren();
    if (state === "running") {
      task.actions.append(
        button(STOP_KEEP, "pause-task", () => this.stop(task, "pause"), { title: "Stop the task; it waits in Pending to be resumed" }),
        button(STOP_DISCARD, "cancel-task", () => this.stop(task, "cancel"), { title: "Stop the task and delete it" }),
      );
    }
    if (state !== "running") this.closeConfirms(task, "no longer waiting");
  }

  async stop(task, how) {
    try {
      const result = await api("POST", `${sessionPath(this.sessionId)}/${how}/${task.hash}`);
      // Issue 34 item 4: what the stop ended, once it has (left out when nothing was).
      if (result?.stopped) this.add(task, stopReceiptCard(result.stopped));
    } catch (error) {
      const what = how === "pause" ? STOP_KEEP : STOP_DISCARD;
      this.add(task, el("div", { class: "note error", text: `${what} failed: ${error.message}` }));
    }
    healthSoon();
  }

  handle(hash, event) {
    if (!hash) {
      // A session's own event (a compaction asked for outside a task): a line of its own.
      const text = event.kind === "compacted" ? compactedLine(event.summarised, event.elided) : event.kind;
      this.log.append(el("li", { class: "note session-note", text }));
      return;
    }
    const task = this.task(hash);
    if (event.kind !== "text") task.text = null;
    if (COUNTED.has(event.kind)) healthSoon();
    switch (event.kind) {
      case "task_started":
        // A resumed run's input is the engine's resume message, meant for the model:
        // show what the person did instead (the answers given here, or "resumed").
        this.add(task, el("div", { class: "user" }, el("span", { class: "who", text: "you" }),
          el("span", { class: "user-text" }, ...visibleNodes(event.resumed_from ? event.said || "resumed" : event.input))));
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
        if (!task.text) {
          task.text = this.add(task, el("div", { class: "assistant" }));
          task.text.markdown = "";
        }
        task.text.markdown += event.text;
        renderAnswerSoon(task.text);
        break;
      case "tool_call":
        this.add(task, el("div", { class: "tool-call" },
          el("span", { class: "tool", text: `→ ${event.tool_name}` }),
          el("pre", { text: readableCall(event.tool_name, event.args) ?? faithfulText(event.args) })));
        break;
      case "tool_result":
        this.add(task, el("div", { class: event.ok ? "tool-result" : "tool-result bad" },
          el("span", { class: "tool", text: `${event.ok ? "✓" : "✗"} ${event.tool_name}` }),
          el("pre", { text: event.output })));
        this.closeConfirms(task, "answered");
        break;
      case "tool_progress": {
        const total = event.total ? `/${event.total} (${Math.round(100 * event.progress / event.total)}%)` : "";
        this.add(task, el("div", { class: "note", text: `⋯ ${event.tool_name}: ${event.progress}${total} ${event.message ?? ""}`.trimEnd() }));
        break;
      }
      case "tool_skipped":
        this.add(task, el("div", { class: "note warn", text: `${event.tool_name} not run: ${event.reason}` }));
        this.closeConfirms(task, "answered");
        break;
      case "confirm":
        this.add(task, confirmCard(this.sessionId, hash, event));
        acknowledge(this.sessionId, event.confirm_hash);
        break;
      case "secret_ask":
        this.add(task, secretCard(this.sessionId, event));
        acknowledge(this.sessionId, event.confirm_hash);
        break;
      case "ask_state":
        // Issue 34: say so when the front-end the ask was shown on has not drawn it.
        if (event.late) {
          this.add(task, el("div", { class: "note warn", text: `the confirmation was shown on ${event.frontend || "a front-end"} but not acknowledged yet` }));
        }
        break;
      case "pending":
        this.add(task, questionsCard(this.sessionId, hash, event.questions));
        this.setState(task, "parked");
        refreshPending();
        break;
      case "compacted":
        this.add(task, el("div", { class: "note", text: compactedLine(event.summarised, event.elided, event.subagent || "") }));
        break;
      case "retrying":
        this.add(task, el("div", { class: "note warn retrying", text: retryingLine(event.reason, event.delay_s, event.subagent || "") }));
        break;
      case "agents_md":
        this.add(task, el("div", { class: "note", text: agentsMdLine(event.paths) }));
        break;
      case "workdir":
        this.add(task, el("div", { class: "note", text: `→ working directory: ${event.path}` }));
        break;
      case "steer_injected":
        this.add(task, el("div", { class: "note", text: `steer: ${event.text}` }));
        break;
      case "leg_started":
        this.add(task, el("div", { class: "note", text: `${event.queued ? "queued" : "started"} ${event.leg_id}: ${event.label}` }));
        break;
      case "leg_report":
        this.add(task, el("pre", { class: "report", text: event.text }));
        break;
      case "leg_finished":
        this.add(task, el("div", { class: "note", text: `${event.leg_id} ${event.status}` },
          el("pre", { text: event.result })));
        break;
      case "job_settled":
        this.add(task, el("div", { class: "note", text: `${event.job_id} settled` }));
        break;
      case "canceled":
        this.add(task, el("div", { class: "note warn", text: pageLine(endedLine(event.cause)) }));
        this.setState(task, event.kept ? "paused" : "canceled");
        refreshPending();
        break;
      case "failed":
        this.add(task, el("div", { class: "note error", text: pageLine(endedLine(event.kept ? "failed_kept" : "failed", event.error)) }));
        this.setState(task, event.kept ? "failed_kept" : "failed");
        if (event.kept) refreshPending();
        break;
      case "done": {
        const last = task.body.lastElementChild;
        const answer = last && last.classList.contains("assistant") ? last : this.add(task, el("div", { class: "assistant" }));
        answer.markdown = event.text;
        renderAnswer(answer);
        // A model that reports no tokens (the built-in one) leaves no usage line.
        if (event.usage && (event.usage.input_tokens || event.usage.output_tokens)) {
          this.add(task, el("div", { class: "note usage", text: usageLine(event.usage) }));
        }
        const session = event.session_usage;
        if (session && (session.input_tokens || session.output_tokens)) {
          this.add(task, el("div", { class: "note usage session-usage", text: `session: ${usageLine(session)}` }));
        }
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

/** One exchange the session had before this page opened it (`GET …/recent`): what
 *  was said and the answer, marked as earlier. */
function earlierBlock(exchange) {
  const answer = el("div", { class: "assistant" });
  answer.markdown = exchange.reply;
  renderAnswer(answer);
  return el(
    "li",
    { class: "earlier", "data-task": exchange.task_hash },
    el("div", { class: "task-head" },
      el("span", { class: "hash", text: `task ${short(exchange.task_hash)}` }),
      el("span", { class: "badge", text: `earlier · ${clock(exchange.end_at)}` })),
    el("div", { class: "task-body" },
      el("div", { class: "user" }, el("span", { class: "who", text: "you" }),
        el("span", { class: "user-text" }, ...visibleNodes(exchange.input))),
      answer),
  );
}

/** Compact the session's conversation now (`POST …/compact`); the ``compacted``
 *  event it makes shows in the log. */
async function compactSession() {
  if (!view) return;
  $("send-error").textContent = "";
  try {
    await api("POST", `${sessionPath(view.sessionId)}/compact`);
  } catch (error) {
    $("send-error").textContent = `compact failed: ${error.message}`;
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

/** Milliseconds a confirmation's buttons stay disabled after it appears (R77): a
 *  click meant for what was under the pointer when the card popped up, or a key on a
 *  focused button, must not answer it. Typing in the composer is never affected: the
 *  card takes no focus. */
const ARM_MS = 400;
/** Code points of text per span in the command box: the hidden-length count is exact
 *  to one span (a span cut by the box's edge counts as shown). */
const SPAN_CHARS = 64;

/** A tool call's arguments as text, drawn as a confirmation draws them (faithfulLines:
 *  one row per line, its label first, escapes visible), so the log never shows a
 *  two-line command as one or lets a bidi character reorder it (R77). */
/** An ask_user call as the REPL shows it (repl.render.call_lines): one line per
 *  question, "Which branch? (main / release)"; null when the arguments are of any
 *  other shape (then they are shown whole, faithfully). */
function readableCall(name, args) {
  if (name !== "ask_user" || Object.keys(args).join() !== "questions") return null;
  const questions = args.questions;
  if (!Array.isArray(questions) || !questions.length) return null;
  const lines = [];
  for (const q of questions) {
    if (!q || typeof q !== "object" || typeof q.text !== "string") return null;
    if (Object.keys(q).some((key) => !["text", "options", "multi"].includes(key))) return null;
    const options = q.options ?? [];
    if (!Array.isArray(options) || !options.every((o) => typeof o === "string")) return null;
    const choices = options.length ? ` (${options.join(" / ")})` : "";
    lines.push(`${q.text}${choices}${q.multi === true ? " (several answers)" : ""}`);
  }
  return lines.join("\n");
}

function faithfulText(args) {
  return faithfulLines(args)
    .map((line) => (line.label ? `${line.label} ` : "") + line.pieces.map(([, text]) => text).join(""))
    .join("\n");
}

/** Extra gutter classes of a diff's line markers (a file change, issue 32). */
const DIFF_GUTTER = { "+": " diff-add", "-": " diff-remove", "@@": " diff-hunk" };

/** The command box of a confirmation: every line of confirmLines(args, change) (a line number
 *  in the gutter, escapes and marks in their own style, CSS wrapping long lines), in a
 *  box that scrolls, and under it a line saying how much is out of view. */
function commandBox(lines) {
  const box = el("div", { class: "command", tabindex: "0", role: "group", "aria-label": "Tool arguments to approve" });
  const spans = [];
  let total = 0;
  for (const line of lines) {
    const row = el("div", { class: "command-line" });
    if (line.label) row.append(el("span", { class: `gutter${DIFF_GUTTER[line.label] ?? ""}`, text: line.label }));
    const code = el("span", { class: "code" });
    for (const [kind, text, source] of line.pieces) {
      const chunks = kind === "text" ? chunked(text) : [text];
      for (const chunk of chunks) {
        const size = kind === "text" ? Array.from(chunk).length : source;
        const span = el("span", { class: kind === "text" ? "" : kind, "data-n": size, text: chunk });
        spans.push(span);
        total += size;
        code.append(span);
      }
    }
    row.append(code);
    box.append(row);
  }
  const size = el("div", { class: "command-size", role: "status", hidden: true });
  const lineCount = `${lines.length} line${lines.length === 1 ? "" : "s"}`;
  let pending = false;
  const update = () => {
    pending = false;
    if (box.scrollHeight <= box.clientHeight + 1) {
      size.textContent = "";
      size.hidden = true;
      return;
    }
    const view = box.getBoundingClientRect();
    const firstBelow = firstIndex(spans, (span) => span.getBoundingClientRect().top >= view.bottom);
    const firstShown = firstIndex(spans, (span) => span.getBoundingClientRect().bottom > view.top);
    const count = (from, to) => spans.slice(from, to).reduce((sum, span) => sum + Number(span.dataset.n), 0);
    const above = count(0, firstShown);
    const below = count(firstBelow, spans.length);
    const parts = [`${lineCount}, ${total.toLocaleString("en")} characters`];
    if (above) parts.push(`${above.toLocaleString("en")} more characters above`);
    if (below) parts.push(`${below.toLocaleString("en")} more characters below`);
    parts.push("scroll the box to see it all");
    size.textContent = parts.join(" · ");
    size.hidden = false;
  };
  const later = () => {
    if (!pending) {
      pending = true;
      requestAnimationFrame(update);
    }
  };
  box.addEventListener("scroll", later);
  new ResizeObserver(later).observe(box);
  return [box, size];
}

/** `text` in pieces of at most SPAN_CHARS code points. */
function chunked(text) {
  const chars = Array.from(text);
  const out = [];
  for (let i = 0; i < chars.length; i += SPAN_CHARS) out.push(chars.slice(i, i + SPAN_CHARS).join(""));
  return out;
}

/** The first index whose item satisfies `test` (false then true along the list), or
 *  the length. The spans are in reading order, so their positions only grow. */
function firstIndex(items, test) {
  let low = 0;
  let high = items.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (test(items[middle])) high = middle;
    else low = middle + 1;
  }
  return low;
}

/** The six answers of one `confirm` event and one per rule it offers (R92, after
 *  the six), worded and ordered as the REPL's dialog (protocol/wording.py). Its
 *  buttons take clicks only ARM_MS after it appeared (`data-armed` then). A restricted
 *  one (R7) says why it offers only the deny and the stops: the system password is
 *  asked only in the REPL (docs/frontends.md, "Every decision on every front-end"). */
function confirmCard(sessionId, taskHash, event) {
  const reason = el("input", { class: "reason", placeholder: "reason (sent to the model)", "aria-label": "Deny reason" });
  const restricted = Boolean(event.restricted || event.need_password);
  const outcome = el("div", { class: "outcome", role: "status" });
  const approve = button(APPROVE, "approve", () => answer({ approve: true }, "approved"),
    { title: "Run this call once" });
  const deny = button(DENY, "deny", () => answer({ approve: false, reason: reason.value }, "denied"),
    { title: "Refuse the call; the reason (optional) goes to the model" });
  const always = button(ALWAYS_ALLOW, "remember", () => answer({ approve: true, remember: true }, "approved and remembered"),
    { title: "Run it, and run exactly this command again in this same directory without asking, in every session of this home, also after a restart" });
  const turn = button(ALLOW_TURN, "allow-turn", () => answer({ approve: true, allow_turn: true }, "approved for this turn"),
    { title: "Run it, and plain programs for the rest of this model turn: never a shell, an interpreter given code, sudo or a restricted path" });
  const offers = (event.offers || []).map((offer) =>
    button(offerLabel(oneLine(offer.covers)), "remember-rule",
      () => answer({ approve: true, rule: offer.kind }, "approved and the rule remembered"),
      { title: "Run it, and remember this rule for every session of this home, also after a restart: it covers exactly what it says" }));
  // A file change (issue 32) offers its edits rule only: no "this exact command", no
  // "Allow this turn" (plain programs).
  const change = event.details?.change ?? null;
  const approving = restricted ? [] : [approve, ...(change ? [] : [always, turn]), ...offers];
  const answers = [...approving, deny];
  const stops = [
    button(STOP_DISCARD, "cancel-in-confirm", () => answer({ approve: false, stop: "user_canceled" }, "stopped and discarded"),
      { title: "Stop the task and delete it" }),
    button(STOP_KEEP, "abort-in-confirm", () => answer({ approve: false, stop: "user_aborted" }, "stopped, kept to resume"),
      { title: "Stop the task; it waits in Pending to be resumed" }),
  ];
  const card = el(
    "div",
    { class: "confirm", "data-open": true, "data-confirm": event.confirm_hash },
    el("div", { class: "confirm-title", text: confirmTitle(event.tool_name, event.restricted) }),
    event.subagent ? el("div", { class: "confirm-subagent", text: `from ${event.subagent}` }) : null,
    ...commandBox(confirmLines(event.args, change, event.details?.interrupted || "")),
    restricted ? el("div", { class: "confirm-restricted", role: "note", text: RESTRICTED_ELSEWHERE }) : null,
    el("div", { class: "buttons" }, ...(restricted ? [] : [approve]), deny, reason),
    change || restricted ? null : el("div", { class: "buttons" }, always, turn),
    el("div", { class: "buttons" }, ...stops),
    offers.length && !restricted ? el("div", { class: "buttons offers" }, ...offers) : null,
    outcome,
  );
  for (const control of [...answers, ...stops]) control.disabled = true;
  setTimeout(() => {
    if (!card.hasAttribute("data-open")) return;
    for (const control of [...answers, ...stops]) control.disabled = false;
    card.setAttribute("data-armed", "");
  }, ARM_MS);
  async function answer(body, done) {
    if (!card.hasAttribute("data-armed")) return;
    if (restricted && body.approve) return; // never offered: the password is the REPL's
    try {
      await api("POST", `${sessionPath(sessionId)}/confirm/${event.confirm_hash}`, body);
      closeCard(card, done, true);
      healthSoon();
    } catch (error) {
      if (error.status === 410) closeCard(card, "already answered or gone");
      else outcome.textContent = `failed: ${error.message}`;
    }
  }
  return card;
}

/** A hidden field for one `secret_ask` event: the value goes to the daemon once (as
 *  the ask's answer) and is never shown, kept or echoed by the page. Armed like a
 *  confirmation, so a stray Enter cannot send an empty or half-typed value. */
function secretCard(sessionId, event) {
  const field = el("input", { class: "secret", type: "password", autocomplete: "off", "aria-label": event.text });
  const outcome = el("div", { class: "outcome", role: "status" });
  const store = button("Store secret", "store-secret", () => answer({ approve: true, answers: [field.value] }, "stored"),
    { title: "Send the value to the daemon, which stores it 0600; the model never sees it" });
  const stops = [
    button(STOP_DISCARD, "cancel-in-confirm", () => answer({ approve: false, stop: "user_canceled" }, "stopped and discarded"),
      { title: "Stop the task and delete it" }),
    button(STOP_KEEP, "abort-in-confirm", () => answer({ approve: false, stop: "user_aborted" }, "stopped, kept to resume"),
      { title: "Stop the task; it waits in Pending to be resumed" }),
  ];
  const card = el(
    "div",
    { class: "confirm secret-ask", "data-open": true, "data-confirm": event.confirm_hash },
    el("div", { class: "confirm-title", text: event.text }),
    event.subagent ? el("div", { class: "confirm-subagent", text: `from ${event.subagent}` }) : null,
    el("div", { class: "buttons" }, field, store),
    el("div", { class: "buttons" }, ...stops),
    outcome,
  );
  for (const control of [store, ...stops]) control.disabled = true;
  setTimeout(() => {
    if (!card.hasAttribute("data-open")) return;
    for (const control of [store, ...stops]) control.disabled = false;
    card.setAttribute("data-armed", "");
  }, ARM_MS);
  field.addEventListener("keydown", (key) => {
    if (key.key === "Enter") store.click();
  });
  async function answer(body, done) {
    if (!card.hasAttribute("data-armed")) return;
    if (body.approve && !field.value) {
      outcome.textContent = "type the value first";
      return;
    }
    try {
      await api("POST", `${sessionPath(sessionId)}/confirm/${event.confirm_hash}`, body);
      field.value = "";
      closeCard(card, done, true);
      healthSoon();
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

/** The answers as the page shows them: a secret's answer is never shown. */
function answerWords(questions, answers) {
  return answers.map((answer, index) => (questions[index]?.secret ? "(secret)" : answer)).join(" | ");
}

/** The `pending` event's questions, answered in place: resume with `answers`. */
function questionsCard(sessionId, taskHash, questions) {
  const outcome = el("div", { class: "outcome", role: "status" });
  const card = el("div", { class: "questions", "data-open": true, "data-task": taskHash });
  card.append(
    el("div", { class: "confirm-title", text: "The task asks:" }),
    questionForm(questions, async (answers) => {
      const words = answerWords(questions, answers);
      try {
        await api("POST", `${sessionPath(sessionId)}/task/${taskHash}/resume`, { answers });
        closeCard(card, `answered: ${words}`, true);
        refreshPending();
        healthSoon();
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
        healthSoon();
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
        task.failure ? el("div", { class: "note error", text: `stopped: ${task.failure}` }) : null,
        task.has_questions ? questionForm(task.questions, resume) : null,
        el("div", { class: "buttons" },
          task.has_questions ? null : button("Resume", "resume", () => resume(null)),
          button("Drop", "drop", drop, { title: "Delete this kept task" })),
        outcome),
    );
  }
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
  for (const panel of ["pending", "history"]) $(`panel-${panel}`).hidden = panel !== name;
  if (name === "pending") refreshPending();
  if (name === "history") searchHistory();
}

// ------------------------------------------------------------------ wiring

let view = null;

function select(sessionId) {
  view?.close();
  localStorage.setItem(CURRENT_KEY, sessionId);
  view = new ChatView(sessionId);
  renderSessions();
  refreshPending();
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
  refreshSessions();
}

async function send() {
  const input = $("input");
  const text = input.value;
  if (!view || !text.trim()) return;
  $("send-error").textContent = "";
  try {
    await api("POST", "/v1/send", { session_id: view.sessionId, input: text });
    input.value = "";
    remember(view.sessionId);
    renderSessions();
    healthSoon();
  } catch (error) {
    $("send-error").textContent = `send failed: ${error.message}`;
  }
}


/** Events after which the header's counts change (a run starts or ends, a leg too). */
const COUNTED = new Set(["task_started", "done", "failed", "canceled", "pending", "leg_started", "leg_finished", "job_settled"]);
/** The header's refresh when no event comes (another session's tasks): a fallback. */
const HEALTH_FALLBACK_MS = 10000;
/** Events arriving together refresh the header once. */
const HEALTH_COALESCE_MS = 50;
let healthAsked = 0;
let healthTimer = null;

/** The header's daemon status, from /v1/health (a late reply never overwrites a newer one). */
async function health() {
  const asked = ++healthAsked;
  let text;
  try {
    const response = await fetch("/v1/health", { cache: "no-store", credentials: "omit" });
    const data = await response.json();
    text = `daemon ${data.version} · ${plural(data.tasks, "running task")} · ${plural(data.legs, "background leg")}`;
  } catch {
    text = "daemon unreachable";
  }
  if (asked === healthAsked) $("daemon-status").textContent = text;
}

/** Refresh the header now (after an event or the page's own action). */
function healthSoon() {
  if (healthTimer !== null) return;
  healthTimer = setTimeout(() => {
    healthTimer = null;
    health();
  }, HEALTH_COALESCE_MS);
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
  $("compact").addEventListener("click", compactSession);
  $("open-session").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("open-session-id").value.trim();
    if (!SESSION_ID.test(id)) {
      $("open-session-error").textContent = "A web session id is chat- followed by letters, digits, _ or -.";
      return;
    }
    $("open-session-error").textContent = "";
    $("open-session-id").value = "";
    remember(id);
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
  for (const tab of document.querySelectorAll("[data-tab]")) {
    tab.addEventListener("click", () => showTab(tab.dataset.tab));
  }
  health();
  setInterval(health, HEALTH_FALLBACK_MS);
  if (token()) signIn();
  else signOut();
}

main();
