// The Timers page (/timers): state tabs with counts (all, enabled, paused,
// disabled, failing: GET /api/v1/timers:counts), search by name, filter by
// app, sort by id or by next fire across every timer (the API's
// sort=next_fire), or this page by name; cursor pagination over GET
// /api/v1/timers. The filters are kept in the URL
// (?state=&search=&app=&sort=) so a filtered list can be shared. Each row
// has a checkbox: Enable, Disable, Pause, Resume and Delete… act on the
// timers selected (POST /api/v1/timers:batch) and list what each one did.
// With no timers at all, the page says how to make the first one.

import { call, confirmBox, el, enc, firstTimer, fmtTime, link, query, statusBadge, describeSchedule, when, zoneLabel } from "../lib.js";

export const PAGE_SIZE = 50;

// STATES are the tabs: the API's state filter ("" for all) and the label.
const STATES = [["", "All"], ["enabled", "Enabled"], ["paused", "Paused"], ["disabled", "Disabled"], ["failing", "Failing"]];

// ACTIONS are the batch actions: the API's action, the button, and the
// word for a timer it changed.
const ACTIONS = [["enable", "Enable", "enabled"], ["disable", "Disable", "disabled"], ["pause", "Pause", "paused"],
  ["resume", "Resume", "resumed"], ["delete", "Delete…", "deleted"]];

export async function render(view, params, ctx) {
  const q = ctx.query;
  const search = el("input", { id: "timers-search", type: "search", value: q.get("search") || "",
    placeholder: "name contains…", attrs: { "aria-label": "Search by name" } });
  const app = el("input", { id: "timers-app", value: q.get("app") || "", placeholder: "any app",
    attrs: { "aria-label": "App" } });
  const sort = el("select", { id: "timers-sort", attrs: { "aria-label": "Sort" } },
    el("option", { value: "", textContent: "sorted by id (creation)" }),
    el("option", { value: "next_fire", textContent: "sorted by next fire" }),
    el("option", { value: "name", textContent: "sorted by name (this page)" }));
  sort.value = q.get("sort") === "next" ? "next_fire" : q.get("sort") || ""; // "next": an older link
  // An older link's enabled=true|false is a state.
  let state = q.get("state") || { true: "enabled", false: "disabled" }[q.get("enabled")] || "";
  if (!STATES.some(([s]) => s === state)) state = "";

  const tabs = el("div", { className: "tabs", id: "timers-tabs", attrs: { role: "tablist", "aria-label": "State" } },
    ...STATES.map(([s, label]) => el("button", { type: "button", dataset: { state: s }, attrs: { role: "tab", "aria-selected": "false" } },
      label, el("span", { className: "count", textContent: "" }))));
  const tbody = el("tbody", { id: "timers-rows" });
  const count = el("span", { className: "muted", id: "timers-count", attrs: { "aria-live": "polite" } });
  const prev = el("button", { type: "button", textContent: "← Previous", disabled: true });
  const next = el("button", { type: "button", textContent: "Next →", disabled: true, id: "timers-next" });
  const all = el("input", { type: "checkbox", id: "timers-all", attrs: { "aria-label": "Select every timer of this page" } });
  const picked = el("span", { className: "muted", id: "batch-count", textContent: "none selected" });
  const buttons = ACTIONS.map(([action, label]) => el("button", { type: "button", textContent: label, disabled: true,
    id: "batch-" + action, className: action === "delete" ? "danger" : "" }));
  const batch = el("div", { className: "toolbar", id: "timers-batch" }, picked, ...buttons);
  const results = el("ul", { className: "results", id: "batch-results", attrs: { "aria-live": "polite" } });
  const empty = el("div", { id: "timers-empty" });

  view.append(
    el("div", { className: "title" }, el("h2", { textContent: "Timers" }), link("/timers/new", "New timer", { className: "button", id: "new-timer" })),
    empty,
    tabs,
    el("form", { className: "filters", id: "timers-filters", role: "search" },
      el("label", {}, "Search ", search), el("label", {}, "App ", app), sort),
    batch, results,
    el("div", { className: "scroll" }, el("table", { className: "list" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col", className: "pick" }, all),
        ...["Name", "App", "Schedule", `Next fire (${zoneLabel()} · timer's zone)`, "State", "Last run"].map((h) => el("th", { scope: "col", textContent: h })))),
      tbody)),
    el("div", { className: "pager" }, prev, next, count));

  let cursors = [""]; // the cursor of each page seen; the last is the page shown
  let nextCursor = "";
  let gen = 0;
  let shown = new Map(); // id → timer, of the page shown
  const selected = new Set();

  // drawSelection updates the count, the select-all box and the buttons.
  function drawSelection() {
    picked.textContent = selected.size ? `${selected.size} selected` : "none selected";
    for (const b of buttons) b.disabled = selected.size === 0;
    all.checked = shown.size > 0 && selected.size === shown.size;
    all.indeterminate = selected.size > 0 && selected.size < shown.size;
  }

  function drawTabs(counts) {
    for (const b of tabs.children) {
      const on = b.dataset.state === state;
      b.setAttribute("aria-selected", String(on));
      if (counts) b.querySelector(".count").textContent = String(counts[b.dataset.state || "all"]);
    }
  }

  async function load() {
    const mine = ++gen;
    const filters = { search: search.value.trim(), app: app.value.trim() };
    history.replaceState(null, "", "/timers" + query({ state, ...filters, sort: sort.value }));
    drawTabs(null);
    const [page, counts] = await Promise.all([
      call("GET", "/timers" + query({ ...filters, state, sort: sort.value === "next_fire" ? "next_fire" : "",
        limit: PAGE_SIZE, cursor: cursors[cursors.length - 1] })),
      call("GET", "/timers:counts" + query(filters)),
    ]);
    if (mine !== gen || ctx.stopped) return;
    ctx.fail(null);
    drawTabs(counts);
    empty.replaceChildren(...(counts.all === 0 && !filters.search && !filters.app ? [firstTimer()] : []));
    nextCursor = page.next_cursor;
    next.disabled = !nextCursor;
    prev.disabled = cursors.length <= 1;
    const list = page.timers;
    const firstFire = (t) => (t.next_fire_times && t.next_fire_times[0]) || "";
    if (sort.value === "name") list.sort((a, b) => a.name.localeCompare(b.name));
    count.textContent = `page ${cursors.length}: ${list.length} timer${list.length === 1 ? "" : "s"}` + (nextCursor ? ", more on the next pages" : "");
    tbody.replaceChildren();
    shown = new Map(list.map((t) => [t.id, t]));
    selected.clear();
    drawSelection();
    if (list.length === 0) {
      tbody.append(el("tr", {}, el("td", { colSpan: 7, className: "muted", textContent: "No timers match." })));
      return;
    }
    const now = new Date().toISOString();
    for (const t of list) {
      const last = el("td", { className: "last-run" }, el("span", { className: "muted", textContent: "…" }));
      const words = describeSchedule(t.schedule, t.timezone);
      const nf = firstFire(t);
      const box = el("input", { type: "checkbox", className: "pick", attrs: { "aria-label": `Select ${t.app}/${t.name}` } });
      box.addEventListener("change", () => { if (box.checked) selected.add(t.id); else selected.delete(t.id); drawSelection(); });
      tbody.append(el("tr", { dataset: { id: t.id } },
        el("td", { className: "pick" }, box),
        el("td", {}, link("/timers/" + enc(t.id), t.name, { className: "timer-link" })),
        el("td", { textContent: t.app }),
        el("td", {}, words ? el("div", { textContent: words }) : null, el("code", { textContent: t.schedule })),
        el("td", {}, nf ? [el("div", {}, when(nf)), el("div", { className: "muted", textContent: fmtTime(nf, t.timezone) })]
          : el("span", { className: "muted", textContent: t.enabled ? "none" : "—" })),
        el("td", {}, el("span", { className: "badge " + (t.enabled ? "on" : "off"), textContent: t.enabled ? "enabled" : "disabled" }),
          t.paused ? [" ", el("span", { className: "badge off", textContent: "paused" })] : null),
        last));
      // The last run: the newest one scheduled before now (past the runs
      // planned ahead).
      call("GET", `/timers/${enc(t.id)}/runs` + query({ limit: 1, before: now })).then((rl) => {
        const r = rl.runs[0];
        last.replaceChildren(r ? link("/runs/" + enc(r.id), "", {}) : statusBadge(""));
        if (r) last.firstChild.append(statusBadge(r.status));
      }, () => last.replaceChildren(el("span", { className: "muted", textContent: "?" })));
    }
  }

  // act applies a batch action to the selected timers and lists what it
  // did to each, then draws the list and the counts again.
  async function act(action, done) {
    const ids = [...selected];
    const names = new Map(ids.map((id) => [id, shown.has(id) ? `${shown.get(id).app}/${shown.get(id).name}` : id]));
    try {
      const r = await call("POST", "/timers:batch", { action, ids });
      if (ctx.stopped) return;
      results.replaceChildren(...r.results.map((it) => el("li", { dataset: { id: it.id, status: String(it.status) },
        className: it.status >= 300 ? "failed" : "" },
        el("strong", { textContent: names.get(it.id) || it.id }), ": ",
        it.changed ? done : it.status >= 300 ? `not done: ${it.reason || "error"} (${it.status})` : it.reason || "unchanged")));
      await load();
    } catch (e) {
      ctx.fail(e);
    }
  }
  ACTIONS.forEach(([action, , done], i) => buttons[i].addEventListener("click", () => {
    if (!selected.size) return;
    if (action === "delete") {
      confirmBox(batch, `Delete ${selected.size} timer${selected.size === 1 ? "" : "s"} and their pending runs?`, "Delete",
        () => act(action, done));
    } else {
      act(action, done);
    }
  }));
  all.addEventListener("change", () => {
    for (const box of tbody.querySelectorAll("input.pick")) {
      box.checked = all.checked;
      const id = box.closest("tr").dataset.id;
      if (all.checked) selected.add(id); else selected.delete(id);
    }
    drawSelection();
  });
  tabs.addEventListener("click", (ev) => {
    const b = ev.target.closest("button");
    if (!b || b.dataset.state === state) return;
    state = b.dataset.state;
    cursors = [""];
    results.replaceChildren();
    load().catch((e) => ctx.fail(e));
  });

  // restart goes back to page 1 when the filters changed (a change event
  // on blur after Enter already applied them is not a change).
  let applied = null;
  function restart() {
    const now = JSON.stringify([search.value.trim(), app.value.trim(), sort.value]);
    if (now === applied) return;
    applied = now;
    cursors = [""];
    load().catch((e) => ctx.fail(e));
  }
  let debounce = 0;
  search.addEventListener("input", () => { clearTimeout(debounce); debounce = setTimeout(restart, 250); });
  app.addEventListener("change", restart);
  sort.addEventListener("change", restart);
  view.querySelector("form").addEventListener("submit", (ev) => { ev.preventDefault(); clearTimeout(debounce); restart(); });
  next.addEventListener("click", () => { if (nextCursor) { cursors.push(nextCursor); load().catch((e) => ctx.fail(e)); } });
  prev.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); load().catch((e) => ctx.fail(e)); } });
  applied = JSON.stringify([search.value.trim(), app.value.trim(), sort.value]);
  await load();
}
