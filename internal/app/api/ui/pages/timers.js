// The Timers page (/timers): search by name, filter by app and enabled,
// sort by id or by next fire across every timer (the API's
// sort=next_fire), or this page by name; cursor pagination over GET
// /api/v1/timers. The filters are kept in the URL
// (?search=&app=&enabled=&sort=) so a filtered list can be shared.

import { call, el, enc, fmtTime, link, query, statusBadge, describeSchedule, viewerZone } from "../lib.js";

export const PAGE_SIZE = 50;

export async function render(view, params, ctx) {
  const q = ctx.query;
  const search = el("input", { id: "timers-search", type: "search", value: q.get("search") || "",
    placeholder: "name contains…", attrs: { "aria-label": "Search by name" } });
  const app = el("input", { id: "timers-app", value: q.get("app") || "", placeholder: "any app",
    attrs: { "aria-label": "App" } });
  const enabled = el("select", { id: "timers-enabled", attrs: { "aria-label": "Enabled" } },
    el("option", { value: "", textContent: "enabled or not" }),
    el("option", { value: "true", textContent: "enabled" }),
    el("option", { value: "false", textContent: "disabled" }));
  enabled.value = q.get("enabled") || "";
  const sort = el("select", { id: "timers-sort", attrs: { "aria-label": "Sort" } },
    el("option", { value: "", textContent: "sorted by id (creation)" }),
    el("option", { value: "next_fire", textContent: "sorted by next fire" }),
    el("option", { value: "name", textContent: "sorted by name (this page)" }));
  sort.value = q.get("sort") === "next" ? "next_fire" : q.get("sort") || ""; // "next": an older link
  const tbody = el("tbody", { id: "timers-rows" });
  const count = el("span", { className: "muted", id: "timers-count", attrs: { "aria-live": "polite" } });
  const prev = el("button", { type: "button", textContent: "← Previous", disabled: true });
  const next = el("button", { type: "button", textContent: "Next →", disabled: true, id: "timers-next" });

  view.append(
    el("div", { className: "title" }, el("h2", { textContent: "Timers" }), link("/timers/new", "New timer", { className: "button", id: "new-timer" })),
    el("form", { className: "filters", id: "timers-filters", role: "search" },
      el("label", {}, "Search ", search), el("label", {}, "App ", app), enabled, sort),
    el("div", { className: "scroll" }, el("table", { className: "list" },
      el("thead", {}, el("tr", {},
        ...["Name", "App", "Schedule", `Next fire (${viewerZone} · timer's zone)`, "Enabled", "Last run"].map((h) => el("th", { scope: "col", textContent: h })))),
      tbody)),
    el("div", { className: "pager" }, prev, next, count));

  let cursors = [""]; // the cursor of each page seen; the last is the page shown
  let nextCursor = "";
  let gen = 0;

  async function load() {
    const mine = ++gen;
    const filters = { search: search.value.trim(), app: app.value.trim(), enabled: enabled.value };
    history.replaceState(null, "", "/timers" + query({ ...filters, sort: sort.value }));
    const page = await call("GET", "/timers" + query({ ...filters, sort: sort.value === "next_fire" ? "next_fire" : "",
      limit: PAGE_SIZE, cursor: cursors[cursors.length - 1] }));
    if (mine !== gen || ctx.stopped) return;
    ctx.fail(null);
    nextCursor = page.next_cursor;
    next.disabled = !nextCursor;
    prev.disabled = cursors.length <= 1;
    const list = page.timers;
    const firstFire = (t) => (t.next_fire_times && t.next_fire_times[0]) || "";
    if (sort.value === "name") list.sort((a, b) => a.name.localeCompare(b.name));
    count.textContent = `page ${cursors.length}: ${list.length} timer${list.length === 1 ? "" : "s"}` + (nextCursor ? ", more on the next pages" : "");
    tbody.replaceChildren();
    if (list.length === 0) {
      tbody.append(el("tr", {}, el("td", { colSpan: 6, className: "muted", textContent: "No timers match." })));
      return;
    }
    const now = new Date().toISOString();
    for (const t of list) {
      const last = el("td", { className: "last-run" }, el("span", { className: "muted", textContent: "…" }));
      const words = describeSchedule(t.schedule, t.timezone);
      const nf = firstFire(t);
      tbody.append(el("tr", { dataset: { id: t.id } },
        el("td", {}, link("/timers/" + enc(t.id), t.name, { className: "timer-link" })),
        el("td", { textContent: t.app }),
        el("td", {}, words ? el("div", { textContent: words }) : null, el("code", { textContent: t.schedule })),
        el("td", {}, nf ? [el("div", { textContent: fmtTime(nf) }), el("div", { className: "muted", textContent: fmtTime(nf, t.timezone) })]
          : el("span", { className: "muted", textContent: t.enabled ? "none" : "—" })),
        el("td", {}, el("span", { className: "badge " + (t.enabled ? "on" : "off"), textContent: t.enabled ? "enabled" : "disabled" })),
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

  // restart goes back to page 1 when the filters changed (a change event
  // on blur after Enter already applied them is not a change).
  let applied = null;
  function restart() {
    const now = JSON.stringify([search.value.trim(), app.value.trim(), enabled.value, sort.value]);
    if (now === applied) return;
    applied = now;
    cursors = [""];
    load().catch((e) => ctx.fail(e));
  }
  let debounce = 0;
  search.addEventListener("input", () => { clearTimeout(debounce); debounce = setTimeout(restart, 250); });
  app.addEventListener("change", restart);
  enabled.addEventListener("change", restart);
  sort.addEventListener("change", restart);
  view.querySelector("form").addEventListener("submit", (ev) => { ev.preventDefault(); clearTimeout(debounce); restart(); });
  next.addEventListener("click", () => { if (nextCursor) { cursors.push(nextCursor); load().catch((e) => ctx.fail(e)); } });
  prev.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); load().catch((e) => ctx.fail(e)); } });
  applied = JSON.stringify([search.value.trim(), app.value.trim(), enabled.value, sort.value]);
  await load();
}
