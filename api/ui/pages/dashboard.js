// The Dashboard (/): runs by status, pool use, live nodes, and the timers
// whose last run failed listed first.

import { call, el } from "../lib.js";

export async function render(view, params, ctx) {
  const cards = el("div", { className: "cards", id: "dash-cards" });
  const failing = el("ul", { id: "dash-failing", className: "plain" });
  view.append(el("h2", { textContent: "Dashboard" }), cards,
    el("section", {}, el("h3", { textContent: "Failing timers" }), failing));
  const card = (label, value, cls = "") => el("div", { className: "card " + cls }, el("div", { className: "label", textContent: label }), el("div", { className: "value", textContent: value }));
  async function load() {
    const [st, nl] = await Promise.all([call("GET", "/stats"), call("GET", "/nodes").catch(() => ({ nodes: [] }))]);
    if (ctx.stopped) return;
    ctx.fail(null);
    cards.replaceChildren(
      card("Timers", `${st.timers.enabled} enabled · ${st.timers.disabled} disabled`),
      ...Object.entries(st.runs).map(([s, n]) => card("Runs " + s, String(n), "status-" + s)),
      card("Pool use", `${st.pool.in_use} / ${st.pool.capacity}`),
      card("Live nodes", String(nl.nodes.length)));
  }
  ctx.every(5000, () => load().catch((e) => ctx.fail(e)));
}
