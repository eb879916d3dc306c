// The Dashboard (/): fires per second, failures per minute and the fire
// delay's p50 and p99 over the last hour (GET /api/v1/stats/series: every
// node's counts added up), runs by status and pool use (GET
// /api/v1/stats), live nodes (GET /api/v1/nodes), and the timers that
// failed or fired late in the last hour, the most failures first, each a
// link to its page. With no timers at all (a fresh install) it starts with
// how to make the first one.

import { call, el, enc, firstTimer, fmtDuration, lineChart, link, statusBadge, when } from "../lib.js";

export async function render(view, params, ctx) {
  const cards = el("div", { className: "cards", id: "dash-cards" });
  const charts = el("div", { className: "charts", id: "dash-charts" });
  const trouble = el("ul", { id: "dash-trouble", className: "plain" });
  const empty = el("div", { id: "dash-empty" });
  view.append(el("h2", { textContent: "Dashboard" }), empty, cards, charts,
    el("section", {}, el("h3", { textContent: "Failing and late timers (last hour)" }), trouble),
    el("p", { className: "muted", id: "dash-note", textContent: "Charts and the timers above add up every node's counts: this node's as they happen, the others' as each last wrote them (about once a minute)." }));
  const card = (label, value, cls = "", id = "") =>
    el("div", { className: "card " + cls, id }, el("div", { className: "label", textContent: label }), el("div", { className: "value", textContent: value }));
  const names = new Map(); // timer id → "app / name" (or null when gone)

  async function load() {
    // Cluster-wide data answers 403 to an app-scoped token: say so, and
    // point to the timers it may see.
    let st, nl, series;
    try {
      [st, nl, series] = await Promise.all([call("GET", "/stats"), call("GET", "/nodes"), call("GET", "/stats/series")]);
    } catch (e) {
      if (e.status !== 403 || ctx.stopped) throw e;
      cards.replaceChildren(el("p", {}, "This token may not read the cluster-wide data of the dashboard (", e.detail, "). ",
        link("/timers", "Its timers"), " are listed on the Timers page."));
      charts.replaceChildren();
      trouble.replaceChildren();
      return;
    }
    if (ctx.stopped) return;
    ctx.fail(null);
    empty.replaceChildren(...(st.timers.total === 0 ? [firstTimer()] : []));
    const pts = series.points;
    const times = pts.map((p) => p.start);
    const sum = (f) => Object.values(f).reduce((a, b) => a + b, 0);
    const fires = pts.map((p) => sum(p.fires) / series.step_seconds);
    const failures = pts.map((p) => (p.fires.failed || 0) + (p.fires.retried || 0));
    const recent = pts.slice(-5).filter((p) => p.delays > 0);
    const p99 = recent.length ? Math.max(...recent.map((p) => p.delay_p99_ms)) : 0;
    cards.replaceChildren(
      card("Fires per second (last 5 min)", (pts.slice(-5).reduce((a, p) => a + sum(p.fires), 0) / 300).toFixed(2), "", "dash-fires"),
      card("Failures (last hour)", String(failures.reduce((a, b) => a + b, 0)), failures.some((f) => f > 0) ? "status-failed" : "", "dash-failures"),
      card("Fire delay p99 (last 5 min)", recent.length ? fmtDuration(p99) : "no fires"),
      card("Pool use", `${st.pool.in_use} of ${st.pool.capacity}`, "", "dash-pool"),
      card("Live nodes", String(nl.nodes.length), "", "dash-nodes"),
      card("Timers", `${st.timers.enabled} enabled, ${st.timers.disabled} disabled`),
      ...Object.entries(st.runs).map(([s, n]) => el("div", { className: "card" },
        el("div", { className: "label" }, "Runs ", statusBadge(s)), el("div", { className: "value", textContent: String(n) }))));
    charts.replaceChildren(
      lineChart("Fires per second", [{ name: "fires/s", values: fires }], "per second", "chart-fires", times),
      lineChart("Failures per minute", [{ name: "failed attempts", values: failures, cls: "bad" }], "per minute", "chart-failures", times),
      lineChart("Fire delay", [{ name: "p50", values: pts.map((p) => p.delay_p50_ms) },
        { name: "p99", values: pts.map((p) => p.delay_p99_ms), cls: "alt" }], "ms", "chart-delay", times));

    const notes = series.timers;
    await Promise.all(notes.filter((n) => !names.has(n.timer_id)).map((n) =>
      call("GET", "/timers/" + enc(n.timer_id)).then((t) => names.set(n.timer_id, `${t.app} / ${t.name}`), () => names.set(n.timer_id, null))));
    if (ctx.stopped) return;
    trouble.replaceChildren();
    if (notes.length === 0) trouble.append(el("li", { className: "muted", textContent: "None: no failed attempt and no fire later than 1 s." }));
    for (const n of notes) {
      const name = names.get(n.timer_id);
      const what = [];
      if (n.failures) what.push(`${n.failures} failed attempt${n.failures === 1 ? "" : "s"} (last `, when(n.last_failure), ")");
      if (n.late) what.push((what.length ? "; " : "") + `${n.late} late fire${n.late === 1 ? "" : "s"}, up to ${fmtDuration(n.max_delay_ms)} late`);
      trouble.append(el("li", { dataset: { id: n.timer_id } },
        el("span", { className: "badge " + (n.failures ? "status-failed" : "dst"), textContent: n.failures ? "failing" : "late" }), " ",
        name === null ? el("code", { textContent: n.timer_id + " (deleted)" }) : link("/timers/" + enc(n.timer_id), name || n.timer_id),
        el("span", { className: "muted" }, " — ", ...what)));
    }
  }
  ctx.every(5000, () => load().catch((e) => ctx.fail(e)));
}
