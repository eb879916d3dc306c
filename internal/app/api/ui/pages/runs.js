// The Runs page (/runs): the runs that came of every timer the token may
// see, newest first (GET /api/v1/runs), with a tab per status showing its
// count (GET /api/v1/runs/counts), a time range (the last hour by
// default), an app and a timer filter (its id or app/name), pages, and a
// link to each run and its timer. The choices are kept in the URL
// (?status=&range=&app=&timer=) so a view can be shared: "failed in the
// last hour" is /runs?status=failed.

import { call, el, enc, fmtDuration, fmtTime, link, query, statusBadge } from "../lib.js";

export const PAGE_SIZE = 50;
const STATUSES = ["", "failed", "running", "pending", "succeeded", "skipped", "cancelled"];
// RANGES: the time ranges offered, as milliseconds back from now.
const RANGES = [["15m", "last 15 minutes", 15 * 60e3], ["1h", "last hour", 3600e3], ["24h", "last 24 hours", 86400e3],
  ["7d", "last 7 days", 7 * 86400e3], ["all", "all time", 0]];

export async function render(view, params, ctx) {
  const q = ctx.query;
  let status = STATUSES.includes(q.get("status") || "") ? q.get("status") || "" : "";
  const range = el("select", { id: "runs-range", attrs: { "aria-label": "Time range" } },
    ...RANGES.map(([v, label]) => el("option", { value: v, textContent: label })));
  range.value = RANGES.some(([v]) => v === q.get("range")) ? q.get("range") : "1h";
  const app = el("input", { id: "runs-app", value: q.get("app") || "", placeholder: "any app", attrs: { "aria-label": "App" } });
  const timer = el("input", { id: "runs-timer", value: q.get("timer") || "", placeholder: "any timer (id or app/name)",
    attrs: { "aria-label": "Timer" } });
  const tabs = el("div", { className: "tabs", id: "runs-tabs", attrs: { role: "tablist", "aria-label": "Status" } });
  const tabButtons = {};
  for (const s of STATUSES) {
    const b = el("button", { type: "button", id: "runs-tab-" + (s || "all"), dataset: { status: s },
      attrs: { role: "tab" } }, el("span", { textContent: s || "all" }), " ", el("span", { className: "count", textContent: "" }));
    b.addEventListener("click", () => { status = s; restart(); });
    tabButtons[s] = b;
    tabs.append(b);
  }
  const tbody = el("tbody", { id: "runs-list" });
  const info = el("span", { className: "muted", id: "runs-info", attrs: { "aria-live": "polite" } });
  const newer = el("button", { type: "button", textContent: "← Newest", disabled: true, id: "runs-first" });
  const older = el("button", { type: "button", textContent: "Older →", disabled: true, id: "runs-next" });

  view.append(
    el("div", { className: "title" }, el("h2", { textContent: "Runs" })),
    el("form", { className: "filters", id: "runs-filters", role: "search" }, range, el("label", {}, "App ", app), el("label", {}, "Timer ", timer)),
    tabs,
    el("div", { className: "scroll" }, el("table", { className: "list" },
      el("thead", {}, el("tr", {}, ...["Scheduled", "Timer", "Status", "Attempt", "Duration", "Node", "Error"].map((h) => el("th", { scope: "col", textContent: h })))),
      tbody)),
    el("div", { className: "pager" }, newer, older, info));

  let cursors = [""], nextCursor = "", gen = 0;
  const names = new Map(); // timer id → "app/name", or a promise of it

  // filters returns the query of the list and the counts: the range's
  // from, the app and the timer.
  function filters() {
    const ms = RANGES.find(([v]) => v === range.value)[2];
    return { app: app.value.trim(), timer: timer.value.trim(), from: ms ? new Date(Date.now() - ms).toISOString() : "" };
  }

  // timerName fills cell with the timer's app/name, fetched once a page.
  function timerName(id, cell) {
    if (!names.has(id)) {
      names.set(id, call("GET", "/timers/" + enc(id)).then((t) => `${t.app}/${t.name}`, () => id));
    }
    names.get(id).then((name) => { cell.textContent = name; });
  }

  async function load() {
    const mine = ++gen;
    history.replaceState(null, "", "/runs" + query({ status, range: range.value === "1h" ? "" : range.value,
      app: app.value.trim(), timer: timer.value.trim() }));
    for (const [s, b] of Object.entries(tabButtons)) b.setAttribute("aria-selected", String(s === status));
    const f = filters();
    const [page, counts] = await Promise.all([
      call("GET", "/runs" + query({ ...f, status, limit: PAGE_SIZE, cursor: cursors[cursors.length - 1] })),
      call("GET", "/runs/counts" + query(f)),
    ]);
    if (mine !== gen || ctx.stopped) return;
    ctx.fail(null);
    for (const [s, b] of Object.entries(tabButtons)) {
      b.querySelector(".count").textContent = String(s ? counts.counts[s] || 0 : counts.total);
    }
    nextCursor = page.next_cursor;
    older.disabled = !nextCursor;
    newer.disabled = cursors.length <= 1;
    info.textContent = `page ${cursors.length}: ${page.runs.length} run${page.runs.length === 1 ? "" : "s"}` + (nextCursor ? ", more on the next pages" : "");
    tbody.replaceChildren();
    if (page.runs.length === 0) {
      const when = range.value === "all" ? "" : " in the " + range.options[range.selectedIndex].textContent;
      tbody.append(el("tr", {}, el("td", { colSpan: 7, className: "muted", textContent: `No ${status ? status + " runs" : "runs"}${when}.` })));
      return;
    }
    for (const r of page.runs) {
      const name = el("a", { href: "/timers/" + enc(r.timer_id), className: "timer-link", textContent: r.timer_id });
      timerName(r.timer_id, name);
      tbody.append(el("tr", { dataset: { id: r.id, status: r.status } },
        el("td", {}, link("/runs/" + enc(r.id), fmtTime(r.scheduled_at), { className: "run-link" }),
          r.manual ? el("span", { className: "muted", textContent: " (manual)" }) : null),
        el("td", {}, name),
        el("td", {}, statusBadge(r.status), r.reason ? el("span", { className: "muted", textContent: ` (${r.reason})` }) : null),
        el("td", { textContent: r.attempt }),
        el("td", { textContent: r.finished_at ? fmtDuration(r.duration_ms) : "" }),
        el("td", { textContent: r.node }),
        el("td", {}, el("code", { className: "run-error", textContent: (r.error || "").slice(0, 160) }))));
    }
  }

  function restart() {
    cursors = [""];
    load().catch((e) => ctx.fail(e));
  }
  range.addEventListener("change", restart);
  app.addEventListener("change", restart);
  timer.addEventListener("change", restart);
  view.querySelector("form").addEventListener("submit", (ev) => { ev.preventDefault(); restart(); });
  older.addEventListener("click", () => { if (nextCursor) { cursors.push(nextCursor); load().catch((e) => ctx.fail(e)); } });
  newer.addEventListener("click", restart);
  // The first page and the counts refresh while the page is shown.
  ctx.every(5000, () => { if (cursors.length === 1) load().catch((e) => ctx.fail(e)); });
}
