// chime's web UI: timers, their recent runs, and a form for HTTP callback
// timers. Plain script, no build step. The server's Content-Security-Policy
// runs no inline code, so every handler is wired here with addEventListener.
//
// Every API call goes through call(). When the server wants a token (401)
// the page shows a sign-in form; the token is kept in sessionStorage (this
// tab only, gone when it closes) and sent as Authorization: Bearer.
"use strict";

const API = document.body.dataset.api || "/api/v1";
const TOKEN_KEY = "chime.token";

let selected = null; // id of the timer whose runs are shown
let needToken = false; // the server asked for a token: polling waits for sign-in
let epoch = 0; // bumped when the token changes: late answers of the old one are dropped

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  Object.assign(e, props);
  for (const c of children) e.append(c);
  return e;
}

// ApiError is a failed call, with the HTTP status of the answer.
class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  epoch++;
  $("signout").hidden = !token;
}

// call sends one API request and returns the decoded JSON answer (null for
// 204). A failed answer throws an ApiError with the server's message; a 401
// also asks for a token.
async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = storedToken();
  if (token) headers.Authorization = "Bearer " + token;
  const opts = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, opts);
  let data = null;
  if (res.status !== 204) {
    try { data = await res.json(); } catch { data = null; }
  }
  if (res.ok) return data;
  const e = (data && data.error) || {};
  const message = e.message || `${res.status} ${res.statusText}`.trim();
  if (res.status === 401) askToken(message);
  throw new ApiError(res.status, (e.field ? e.field + ": " : "") + message);
}

// askToken shows the sign-in form with message and hides what the page
// showed: a token that got a 401 is forgotten.
function askToken(message) {
  if (storedToken()) setToken("");
  needToken = true;
  selected = null;
  clearViews("Sign in to see the timers.");
  $("signin-error").textContent = message;
  const panel = $("signin");
  if (panel.hidden) {
    panel.hidden = false;
    $("signin-token").focus();
  }
}

function clearViews(note) {
  $("stats").textContent = "";
  $("timers").replaceChildren(el("tr", {}, el("td", { colSpan: 7, className: "muted", textContent: note })));
  $("runs-title").hidden = $("runs-table").hidden = true;
  $("runs").replaceChildren();
}

// showError shows err in the page (a 401 is shown by the sign-in form).
function showError(err) {
  if (err instanceof ApiError && err.status === 401) err = null;
  $("error").textContent = err ? String(err.message || err) : "";
}

function fmtTime(s) {
  return s ? s.replace("T", " ").replace(/\.\d+/, "") : "";
}

async function loadStats(gen) {
  let s;
  try {
    s = await call("GET", "/stats");
  } catch (e) {
    if (gen === epoch) $("stats").textContent = ""; // stats are a nicety (and cluster-wide: 403 for app tokens)
    return;
  }
  if (gen !== epoch) return;
  $("stats").textContent =
    `${s.timers.enabled} enabled, ${s.timers.disabled} disabled · ` +
    `runs: ${s.runs.pending} pending, ${s.runs.running} running, ${s.runs.succeeded} succeeded, ${s.runs.failed} failed · ` +
    `pool ${s.pool.in_use}/${s.pool.capacity}`;
}

// button returns a button that runs fn, shows its error, and refreshes.
function button(label, fn, cls = "") {
  const b = el("button", { type: "button", textContent: label, className: cls });
  b.addEventListener("click", async (ev) => {
    ev.stopPropagation(); // not a click on the row
    try {
      await fn();
      showError();
      await refresh();
    } catch (e) {
      showError(e);
    }
  });
  return b;
}

async function loadTimers(gen) {
  const timers = [];
  let cursor = "";
  do {
    const page = await call("GET", "/timers?limit=1000" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    timers.push(...page.timers);
    cursor = page.next_cursor;
  } while (cursor);
  if (gen !== epoch) return;
  const tbody = $("timers");
  tbody.replaceChildren();
  if (timers.length === 0) {
    tbody.append(el("tr", {}, el("td", { colSpan: 7, className: "muted", textContent: "No timers yet." })));
  }
  for (const t of timers) {
    const id = encodeURIComponent(t.id);
    const actions = el("td", {},
      t.enabled ? button("Disable", () => call("POST", `/timers/${id}/disable`))
                : button("Enable", () => call("POST", `/timers/${id}/enable`)),
      button("Trigger", () => call("POST", `/timers/${id}/trigger`)),
      button("Delete", async () => {
        if (!confirm(`Delete timer ${t.app}/${t.name}?`)) return;
        await call("DELETE", `/timers/${id}`);
        if (selected === t.id) selected = null;
      }, "danger"));
    const row = el("tr", { className: "timer" + (selected === t.id ? " selected" : "") },
      el("td", { textContent: t.name, title: t.description || "" }),
      el("td", { textContent: t.app }),
      el("td", {}, el("code", { textContent: t.schedule })),
      el("td", { textContent: t.timezone }),
      el("td", { textContent: t.enabled ? "yes" : "no" }),
      el("td", { textContent: fmtTime((t.next_fire_times || [])[0]) }),
      actions);
    row.addEventListener("click", () => { selected = t.id; refresh(); });
    tbody.append(row);
  }
}

async function loadRuns(gen) {
  const title = $("runs-title"), table = $("runs-table");
  if (!selected) {
    title.hidden = table.hidden = true;
    return;
  }
  const id = selected;
  const page = await call("GET", `/timers/${encodeURIComponent(id)}/runs?limit=20`);
  if (gen !== epoch || id !== selected) return;
  title.hidden = table.hidden = false;
  title.textContent = `Recent runs of ${id}`;
  const tbody = $("runs");
  tbody.replaceChildren();
  if (page.runs.length === 0) {
    tbody.append(el("tr", {}, el("td", { colSpan: 6, className: "muted", textContent: "No runs yet." })));
  }
  for (const r of page.runs) {
    tbody.append(el("tr", {},
      el("td", { textContent: fmtTime(r.scheduled_at) + (r.manual ? " (manual)" : "") }),
      el("td", { textContent: r.status, className: "status-" + r.status }),
      el("td", { textContent: r.attempt }),
      el("td", { textContent: r.finished_at ? r.duration_ms + " ms" : "" }),
      el("td", { textContent: r.node }),
      el("td", { textContent: (r.error || r.output || "").slice(0, 200) })));
  }
}

async function refresh() {
  const gen = epoch;
  try {
    await loadTimers(gen);
    await loadRuns(gen);
    await loadStats(gen);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) selected = null;
    showError(e);
  }
}

$("signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = $("signin-token");
  const token = input.value.trim();
  if (!token) return;
  input.value = "";
  setToken(token);
  needToken = false;
  $("signin").hidden = true;
  $("signin-error").textContent = "";
  showError();
  clearViews("Loading…");
  await refresh(); // a wrong token brings the form back with the server's message
});

$("signout").addEventListener("click", () => {
  setToken("");
  selected = null;
  showError();
  clearViews("Signed out.");
  refresh(); // with auth on, the server's 401 brings up the sign-in form
});

$("create").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const form = ev.target;
  const f = new FormData(form);
  const body = {
    app: f.get("app"), name: f.get("name"), description: f.get("description"),
    schedule: f.get("schedule"), timezone: f.get("timezone") || "UTC",
    timeout: f.get("timeout") || "30s",
    retry: { max_attempts: Number(f.get("max_attempts") || 1), backoff: f.get("backoff") || "1s" },
    action: { type: "http", http: { method: f.get("method"), url: f.get("url"), body: f.get("body") } },
  };
  try {
    const t = await call("POST", "/timers", body);
    selected = t.id;
    showError();
    form.reset();
    await refresh();
  } catch (e) {
    showError(e); // the form keeps what was typed: after a sign-in, Create again
  }
});

$("signout").hidden = !storedToken();
refresh();
setInterval(() => { if (!needToken) refresh(); }, 5000);
