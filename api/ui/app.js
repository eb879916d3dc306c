// app.js: the router of chime's web UI. The server serves the same page
// (index.html) at every UI path (/, /timers, /timers/{id}, /timers/new,
// /timers/{id}/edit, /runs, /runs/{id}, /nodes), so links can be shared and
// reloaded; this module draws the page the path names and routes clicks on
// in-app links without reloading. Plain JavaScript modules, no build step.
// The server's Content-Security-Policy runs no inline code, so every
// handler is wired with addEventListener.

import { el, setToken, storedToken, whenUnauthorized } from "./lib.js";
import * as dashboard from "./pages/dashboard.js";
import * as timersPage from "./pages/timers.js";
import * as timerPage from "./pages/timer.js";
import * as formPage from "./pages/form.js";
import * as runPage from "./pages/run.js";
import * as runsPage from "./pages/runs.js";
import * as nodesPage from "./pages/nodes.js";

const $ = (id) => document.getElementById(id);

// routes: a pattern of path segments (":x" captures) and its page.
const routes = [
  [[], dashboard, "dashboard"],
  [["timers"], timersPage, "timers"],
  [["timers", "new"], formPage, "timers"],
  [["timers", ":id", "edit"], formPage, "timers"],
  [["timers", ":id"], timerPage, "timers"],
  [["runs"], runsPage, "runs"],
  [["runs", ":id"], runPage, "runs"],
  [["nodes"], nodesPage, "nodes"],
];

function match(path) {
  const segs = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const [pattern, page, nav] of routes) {
    if (pattern.length !== segs.length) continue;
    const params = {};
    if (pattern.every((p, i) => (p.startsWith(":") ? ((params[p.slice(1)] = segs[i]), true) : p === segs[i]))) {
      return { page, params, nav };
    }
  }
  return null;
}

let current = null; // { stop } of the page drawn

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
    view.append(el("h2", { textContent: "Not found" }), el("p", { textContent: "No page at " + location.pathname + "." }));
    current = null;
    return;
  }
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
  try {
    const p = m.page.render(view, m.params, ctx);
    if (p && p.catch) p.catch((e) => ctx.fail(e));
  } catch (e) {
    ctx.fail(e);
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

$("signout").hidden = !storedToken();
render();
