// The Nodes page (/nodes): each live node with its heartbeat age and the
// slices it holds (GET /api/v1/nodes), and the pool use of the node that
// answers (GET /api/v1/stats: the API reports only its own pool).

import { ago, call, el, fmtTime } from "../lib.js";

export async function render(view, params, ctx) {
  const tbody = el("tbody", { id: "nodes-rows" });
  const pool = el("p", { id: "nodes-pool" });
  view.append(el("h2", { textContent: "Nodes" }), pool,
    el("div", { className: "scroll" }, el("table", { className: "list" },
      el("thead", {}, el("tr", {}, ...["Node", "Address", "Heartbeat", "Started", "Slices held"].map((h) => el("th", { scope: "col", textContent: h })))),
      tbody)));
  async function load() {
    const [nl, st] = await Promise.all([call("GET", "/nodes"), call("GET", "/stats")]);
    if (ctx.stopped) return;
    ctx.fail(null);
    pool.replaceChildren(el("strong", { textContent: "Pool use (answering node): " }),
      `${st.pool.in_use} of ${st.pool.capacity} actions running`, el("meter", { min: 0, max: st.pool.capacity || 1, value: st.pool.in_use }));
    tbody.replaceChildren();
    if (nl.nodes.length === 0) tbody.append(el("tr", {}, el("td", { colSpan: 5, className: "muted", textContent: "No live nodes." })));
    for (const n of nl.nodes) {
      tbody.append(el("tr", { dataset: { id: n.id } },
        el("td", {}, el("code", { textContent: n.id })),
        el("td", { textContent: n.addr || "—" }),
        el("td", { textContent: ago(n.seen_at), title: fmtTime(n.seen_at) }),
        el("td", { textContent: fmtTime(n.started_at) }),
        el("td", { textContent: n.slices.length ? `${n.slices.length}: ${n.slices.join(", ")}` : "none" })));
    }
  }
  ctx.every(5000, () => load().catch((e) => ctx.fail(e)));
}
