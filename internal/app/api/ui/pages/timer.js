// The Timer page (/timers/{id}): the definition, the timers it runs after
// and those that run after it (GET /api/v1/timers/{id}/graph, shown when
// there are any), the next 10 fires with
// daylight-saving changes marked, the runs (its history, newest first,
// with a status filter, or its upcoming fires, soonest first; pages) and
// the actions: enable/disable, pause/resume (a paused timer keeps its
// schedule and records each fire skipped when it comes), trigger now,
// backfill, edit, delete; those that fire, pause or destroy ask first.

import { call, confirmBox, el, enc, fill, fmtDuration, fmtTime, link, offsetOf, pretty, query, statusBadge, describeSchedule, timeTitle, when } from "../lib.js";

const STATUSES = ["", "pending", "running", "succeeded", "failed", "skipped", "cancelled"];
const RUNS_PAGE = 20;

export async function render(view, params, ctx) {
  const id = params.id;
  const head = el("div", { className: "title" });
  const bar = el("div", { className: "toolbar", id: "timer-actions" });
  const note = el("p", { className: "note", id: "timer-note", attrs: { role: "status" } });
  const def = el("dl", { className: "def", id: "timer-def" });
  const fires = el("ol", { className: "fires", id: "timer-fires" });
  const deps = el("section", { id: "timer-deps", hidden: true });
  const status = el("select", { id: "runs-status", attrs: { "aria-label": "Status" } },
    ...STATUSES.map((s) => el("option", { value: s, textContent: s || "any status" })));
  const runsView = el("select", { id: "runs-view", attrs: { "aria-label": "Runs shown" } },
    el("option", { value: "history", textContent: "history" }),
    el("option", { value: "upcoming", textContent: "upcoming fires" }));
  const runsBody = el("tbody", { id: "runs-rows" });
  const older = el("button", { type: "button", textContent: "Older →", disabled: true, id: "runs-older" });
  const newest = el("button", { type: "button", textContent: "← Newest", disabled: true, id: "runs-newest" });
  const from = el("input", { type: "datetime-local", step: 1, id: "backfill-from", attrs: { "aria-label": "Backfill from" } });
  const to = el("input", { type: "datetime-local", step: 1, id: "backfill-to", attrs: { "aria-label": "Backfill to" } });
  const backfill = el("form", { className: "backfill", id: "backfill-form" },
    el("span", { textContent: "Backfill past fires from " }), from, el("span", { textContent: " to " }), to,
    el("button", { type: "submit", textContent: "Backfill…" }));

  view.append(head, bar, note,
    el("div", { className: "columns" },
      el("section", {}, el("h3", { textContent: "Definition" }), def),
      el("section", {}, el("h3", { textContent: "Next 10 fires" }), fires)),
    deps,
    backfill,
    el("section", {}, el("div", { className: "title" }, el("h3", { textContent: "Runs" }), runsView, status),
      el("div", { className: "scroll" }, el("table", { className: "list" },
        el("thead", {}, el("tr", {}, ...["Scheduled", "Status", "Attempt", "Delay", "Duration", "Node", "Output / error"].map((h) => el("th", { scope: "col", textContent: h })))),
        runsBody)),
      el("div", { className: "pager" }, newest, older)));

  let timer = null;
  const act = async (what, fn) => {
    try {
      const r = await fn();
      if (what) note.textContent = what;
      ctx.fail(null);
      return r;
    } catch (e) {
      ctx.fail(e);
    }
  };

  function drawTimer(t) {
    timer = t;
    fill(head, el("h2", { textContent: `${t.app} / ${t.name}` }),
      el("span", { className: "badge " + (t.enabled ? "on" : "off"), id: "timer-enabled", textContent: t.enabled ? "enabled" : "disabled" }),
      t.paused ? el("span", { className: "badge off", id: "timer-paused", textContent: "paused" }) : null,
      t.disabled_reason ? el("p", { className: "error", id: "timer-disabled-reason", textContent: t.disabled_reason }) : null);
    const toggle = t.enabled
      ? el("button", { type: "button", textContent: "Disable", id: "timer-disable" })
      : el("button", { type: "button", textContent: "Enable", id: "timer-enable" });
    const pause = t.paused
      ? el("button", { type: "button", textContent: "Resume…", id: "timer-resume" })
      : el("button", { type: "button", textContent: "Pause…", id: "timer-pause" });
    pause.addEventListener("click", () => t.paused
      ? confirmBox(bar, `Resume ${t.name}? It fires again from its next fire; the fires missed while paused are not run.`, "Resume",
        () => act("Resumed: it fires again from its next fire.", () => call("POST", `/timers/${enc(id)}/resume`).then(drawTimer).then(() => loadRuns())))
      : confirmBox(bar, `Pause ${t.name}? Its fires will be recorded as skipped (paused) until it is resumed.`, "Pause",
        () => act("Paused: its fires are recorded skipped until resumed.", () => call("POST", `/timers/${enc(id)}/pause`).then(drawTimer).then(() => loadRuns()))));
    toggle.addEventListener("click", () => act(t.enabled ? "Disabled: no more fires until enabled." : "Enabled.",
      () => call("POST", `/timers/${enc(id)}/${t.enabled ? "disable" : "enable"}`).then(drawTimer)));
    const trigger = el("button", { type: "button", textContent: "Trigger now…", id: "timer-trigger" });
    trigger.addEventListener("click", () => confirmBox(bar, `Run ${t.name} now, outside its schedule?`, "Trigger now",
      () => act("Triggered: a manual run was queued.", () => call("POST", `/timers/${enc(id)}/trigger`).then(() => loadRuns()))));
    const del = el("button", { type: "button", className: "danger", textContent: "Delete…", id: "timer-delete" });
    del.addEventListener("click", () => confirmBox(bar, `Delete ${t.app}/${t.name} and its pending runs?`, "Delete",
      () => act("Deleted.", async () => { await call("DELETE", `/timers/${enc(id)}`); ctx.navigate("/timers"); })));
    bar.replaceChildren(toggle, pause, trigger, link(`/timers/${enc(id)}/edit`, "Edit", { className: "button", id: "timer-edit" }), del);

    const words = describeSchedule(t.schedule, t.timezone);
    const row = (k, ...v) => [el("dt", { textContent: k }), el("dd", {}, ...v)];
    const p = t.policy || {}, r = t.retry || {};
    def.replaceChildren(
      ...row("ID", el("code", { textContent: t.id })),
      ...row("Description", t.description || "—"),
      ...row("Schedule", words ? el("div", { textContent: words }) : null, el("code", { textContent: t.schedule })),
      ...row("Time zone", t.timezone),
      ...row("Action", el("pre", { textContent: pretty(JSON.stringify(t.action)) })),
      ...row("Timeout", t.timeout),
      ...row("Retry", `${r.max_attempts} attempt${r.max_attempts === 1 ? "" : "s"}, backoff ${r.backoff}` + (r.max_backoff ? ` up to ${r.max_backoff}` : "")),
      ...row("Policy", `misfire ${p.misfire}, overlap ${p.overlap}` + (p.catchup_window ? `, catch-up window ${p.catchup_window}` : "") +
        (p.max_fires ? `, at most ${p.max_fires} fires` : "") + (p.start_at ? `, from ${fmtTime(p.start_at)}` : "") + (p.end_at ? `, until ${fmtTime(p.end_at)}` : "") +
        (p.jitter ? `, jitter ${p.jitter}` : "") + (p.dst && p.dst !== "default" ? `, daylight saving ${p.dst}` : "")),
      ...row("Run history", historyText(t.history)),
      ...row("Created", when(t.created_at)), ...row("Updated", when(t.updated_at)));
    loadFires(t);
    loadGraph().catch((e) => ctx.fail(e));
  }

  // loadGraph shows the timers this one runs after and those that run
  // after it, as links, when there are any.
  async function loadGraph() {
    const g = await call("GET", `/timers/${enc(id)}/graph`);
    if (ctx.stopped) return;
    const list = (edges, listId, verb) => el("ul", { className: "deps", id: listId },
      ...edges.map((e) => el("li", {}, link("/timers/" + enc(e.timer.id), `${e.timer.app}/${e.timer.name}`, { className: "dep-link" }),
        el("span", { className: "muted", textContent: ` ${verb} ${e.on}` + (e.timer.enabled ? "" : " (disabled)") }))));
    deps.hidden = g.upstreams.length === 0 && g.downstreams.length === 0;
    fill(deps, el("h3", { textContent: "Dependencies" }),
      g.upstreams.length ? el("p", { textContent: "Runs after (each, since its last run after them):" }) : null,
      g.upstreams.length ? list(g.upstreams, "timer-upstreams", "on") : null,
      g.downstreams.length ? el("p", { textContent: "Runs before:" }) : null,
      g.downstreams.length ? list(g.downstreams, "timer-downstreams", "runs after it on") : null);
  }

  async function loadFires(t) {
    if (!t.enabled) {
      fires.replaceChildren(el("li", { className: "muted", textContent: "None: the timer is disabled." }));
      return;
    }
    if (!t.schedule) {
      fires.replaceChildren(el("li", { className: "muted", textContent: "None scheduled: the timer runs after its upstreams." }));
      return;
    }
    // The timer's own next fires: its @every anchor, DST choice, bounds and jitter.
    const r = await call("GET", `/timers/${enc(t.id)}/next` + query({ n: 10 }));
    fires.replaceChildren();
    if (r.fires.length === 0) fires.append(el("li", { className: "muted", textContent: "No fires ahead." }));
    let prevOff = "";
    for (const f of r.fires) {
      const s = f.scheduled_at;
      const off = offsetOf(s);
      const li = el("li", { textContent: `${fmtTime(s, t.timezone)} · ${fmtTime(s)}`, title: timeTitle(s) });
      if (f.due_at !== s) li.append(el("span", { className: "muted", textContent: ` (due ${fmtTime(f.due_at)}, jitter)` }));
      if (prevOff && off !== prevOff) {
        li.classList.add("dst");
        li.append(el("span", { className: "badge dst", textContent: `clock change: UTC${prevOff} → UTC${off}` }));
      }
      prevOff = off;
      fires.append(li);
    }
  }

  let cursors = [""], nextCursor = "";
  async function loadRuns() {
    const upcoming = runsView.value === "upcoming";
    status.hidden = upcoming; // the upcoming fires are all pending
    const page = await call("GET", `/timers/${enc(id)}/runs` + query({ view: runsView.value, status: upcoming ? "" : status.value,
      limit: RUNS_PAGE, cursor: cursors[cursors.length - 1] }));
    if (ctx.stopped) return;
    nextCursor = page.next_cursor;
    older.disabled = !nextCursor;
    newest.disabled = cursors.length <= 1;
    runsBody.replaceChildren();
    if (page.runs.length === 0) {
      runsBody.append(el("tr", {}, el("td", { colSpan: 7, className: "muted",
        textContent: upcoming ? "No fires planned ahead." : "No runs." })));
    }
    for (const r of page.runs) {
      const delay = r.started_at ? new Date(r.started_at) - new Date(r.due_at) : null;
      const text = (r.error || r.output || "").slice(0, 160);
      runsBody.append(el("tr", { dataset: { id: r.id, status: r.status } },
        el("td", {}, link("/runs/" + enc(r.id), fmtTime(r.scheduled_at), { className: "run-link", title: timeTitle(r.scheduled_at) }), r.manual ? el("span", { className: "muted", textContent: " (manual)" }) : null,
          r.upstream_run_id ? el("span", { className: "muted" }, " (after ", link("/runs/" + enc(r.upstream_run_id), "run", { className: "upstream-link" }), ")") : null),
        el("td", {}, statusBadge(r.status), r.reason ? el("span", { className: "muted run-reason", textContent: ` (${r.reason})`, title: r.error }) : null),
        el("td", { textContent: r.attempt }),
        el("td", { textContent: delay === null ? "" : fmtDuration(delay) }),
        el("td", { textContent: r.finished_at ? fmtDuration(r.duration_ms) : "" }),
        el("td", { textContent: r.node }),
        el("td", {}, el("code", { className: r.error ? "run-error" : "run-output", textContent: text }))));
    }
  }
  status.addEventListener("change", () => { cursors = [""]; loadRuns().catch((e) => ctx.fail(e)); });
  runsView.addEventListener("change", () => { cursors = [""]; loadRuns().catch((e) => ctx.fail(e)); });
  older.addEventListener("click", () => { cursors.push(nextCursor); loadRuns().catch((e) => ctx.fail(e)); });
  newest.addEventListener("click", () => { cursors = [""]; loadRuns().catch((e) => ctx.fail(e)); });
  backfill.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!from.value || !to.value) { ctx.fail(new Error("backfill: from and to are required")); return; }
    const body = { from: new Date(from.value).toISOString(), to: new Date(to.value).toISOString() };
    confirmBox(bar, `Run every fire of ${timer.name} from ${fmtTime(body.from)} to ${fmtTime(body.to)} now?`, "Backfill",
      () => act("", async () => {
        const r = await call("POST", `/timers/${enc(id)}/backfill`, body);
        note.textContent = `Backfill: ${r.count} run${r.count === 1 ? "" : "s"} queued.`;
        await loadRuns();
      }));
  });

  drawTimer(await call("GET", "/timers/" + enc(id)));
  // The runs refresh while the page is shown (only the newest page moves).
  ctx.every(2000, () => { if (cursors.length === 1) loadRuns().catch((e) => ctx.fail(e)); });
}

// historyText says what a timer's run retention keeps: the fields it does
// not set follow the server's defaults.
function historyText(h = {}) {
  const keep = h.keep === undefined ? "the server's default count" : h.keep === 0 ? "any number" : `the last ${h.keep}`;
  const age = h.max_age === undefined ? "the server's default age" : /^0[a-z]*$/.test(h.max_age) ? "any age" : `at most ${h.max_age} old`;
  return `keeps ${keep} of finished runs, ${age}`;
}
