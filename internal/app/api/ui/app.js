// app.js: the router of chime's web UI. The server serves the same page
// (index.html) at every UI path (/, /timers, /timers/{id}, /timers/new,
// /timers/{id}/edit, /runs, /runs/{id}, /nodes), so links can be shared and
// reloaded; this module draws the page the path names and routes clicks on
// in-app links without reloading. A path of no page, and a timer or run
// the API does not know (404), get a page that says so. The header's
// choices of time display and theme are kept in local storage. Plain JavaScript modules, no build step.
// The server's Content-Security-Policy runs no inline code, so every
// handler is wired with addEventListener.

import { THEMES, TIME_MODES, applyTheme, el, link, setTimeMode, setToken, storedToken, theme, timeMode, whenUnauthorized } from "./lib.js";
import * as dashboard from "./pages/dashboard.js";
import * as timersPage from "./pages/timers.js";
import * as timerPage from "./pages/timer.js";
import * as formPage from "./pages/form.js";
import * as runPage from "./pages/run.js";
import * as runsPage from "./pages/runs.js";
import * as nodesPage from "./pages/nodes.js";

const $ = (id) => document.getElementById(id);

// routes: a pattern of path segments (":x" captures), its page, its
// navigation link and what its :id names (for the not-found page).
const routes = [
  [[], dashboard, "dashboard"],
  [["timers"], timersPage, "timers"],
  [["timers", "new"], formPage, "timers"],
  [["timers", ":id", "edit"], formPage, "timers", "timer"],
  [["timers", ":id"], timerPage, "timers", "timer"],
  [["runs"], runsPage, "runs"],
  [["runs", ":id"], runPage, "runs", "run"],
  [["nodes"], nodesPage, "nodes"],
];

function match(path) {
  const segs = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const [pattern, page, nav, kind] of routes) {
    if (pattern.length !== segs.length) continue;
    const params = {};
    if (pattern.every((p, i) => (p.startsWith(":") ? ((params[p.slice(1)] = segs[i]), true) : p === segs[i]))) {
      return { page, params, nav, kind };
    }
  }
  return null;
}

let current = null; // { stop } of the page drawn

// notFound draws the page of a path with nothing at it: no such page, or
// (kind, id) no such timer or run.
function notFound(view, kind, id) {
  const what = kind ? `${kind[0].toUpperCase()}${kind.slice(1)} not found` : "Page not found";
  const why = kind === "run"
    ? ["There is no run ", el("code", { textContent: id }), ": the link is wrong, or the run was deleted (with its timer, or by the timer's run retention)."]
    : kind === "timer"
      ? ["There is no timer ", el("code", { textContent: id }), ": the link is wrong, or the timer was deleted."]
      : ["There is no page at ", el("code", { textContent: location.pathname }), "."];
  view.replaceChildren(el("section", { className: "notfound", id: "not-found" },
    el("h2", { textContent: what }), el("p", {}, ...why),
    el("p", {}, "Go to ", link("/", "the dashboard"), ", ", link("/timers", "the timers"), " or ", link("/nodes", "the nodes"), ".")));
}

// render draws the page of the current location.
function render() {
  if (current) current.stop();
  const view = $("view");
  view.replaceChildren();
  $("error").textContent = "";
  const m = match(location.pathname);
  for (const a of document.querySelectorAll("nav a")) {
    if (m && a.dataset.nav === m.nav) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (!m) {
    notFound(view);
    document.title = "Not found · chime";
    current = null;
    return;
  }
  document.title = "chime";
  const ctx = {
    stopped: false,
    timers: [],
    // every runs fn now and every ms while the page is shown.
    every(ms, fn) { fn(); this.timers.push(setInterval(() => { if (!this.stopped) fn(); }, ms)); },
    stop() { this.stopped = true; this.timers.forEach(clearInterval); },
    // fail shows err on the page (a 401 is shown by the sign-in prompt).
    fail(err) {
      if (this.stopped || (err && err.status === 401)) return;
      $("error").textContent = err ? String(err.message || err) : "";
    },
    navigate,
    query: new URLSearchParams(location.search),
  };
  current = ctx;
  // A 404 while the page is drawn: the timer or run it names is not there.
  const failed = (e) => {
    if (m.kind && e && e.status === 404 && !ctx.stopped) {
      ctx.stop();
      $("error").textContent = "";
      notFound(view, m.kind, m.params.id);
      document.title = "Not found · chime";
      return;
    }
    ctx.fail(e);
  };
  try {
    const p = m.page.render(view, m.params, ctx);
    if (p && p.catch) p.catch(failed);
  } catch (e) {
    failed(e);
  }
}

// navigate goes to an in-app path (replace: without a history entry).
export function navigate(path, replace = false) {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  render();
  $("view").focus();
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a");
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const href = a.getAttribute("href");
  if (!href || !href.startsWith("/") || href.startsWith("//") || href.startsWith("/api/") || a.target) return;
  ev.preventDefault();
  navigate(href);
});
window.addEventListener("popstate", render);

// The sign-in prompt: shown on a 401, the page hidden behind it.
whenUnauthorized((message) => {
  if (current) current.stop();
  $("view").replaceChildren();
  $("error").textContent = "";
  $("signin-error").textContent = message;
  const panel = $("signin");
  if (panel.hidden) {
    panel.hidden = false;
    $("signin-token").focus();
  }
});

$("signin-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = $("signin-token");
  const token = input.value.trim();
  if (!token) return;
  input.value = "";
  setToken(token);
  $("signin").hidden = true;
  $("signin-error").textContent = "";
  render(); // a wrong token brings the prompt back with the server's message
});

$("signout").addEventListener("click", () => {
  setToken("");
  render(); // with auth on, the server's 401 brings up the prompt
});

// The viewer's choices: how times are shown (the page is drawn again in
// the new way) and the theme.
function choice(select, options, value, set) {
  select.replaceChildren(...Object.entries(options).map(([v, text]) => el("option", { value: v, textContent: text })));
  select.value = value;
  select.addEventListener("change", () => set(select.value));
}
choice($("time-mode"), TIME_MODES, timeMode(), (v) => { setTimeMode(v); render(); });
choice($("theme"), THEMES, theme(), (v) => applyTheme(v));
applyTheme();

$("signout").hidden = !storedToken();
render();
