// The Nodes page (/nodes): each live node with its heartbeat age, the
// slices it holds, its pool use at that heartbeat and where it coordinates
// with the others (GET /api/v1/nodes).

import { ago, call, el, timeTitle, when } from "../lib.js";

const coordinationTitle = {
  redis: "slice locks, elections and slice index in Redis",
  db: "slice locks and elections as lease rows in the database",
  local: "in this process, or in files beside a shared SQLite file",
};

export async function render(view, params, ctx) {
  const tbody = el("tbody", { id: "nodes-rows" });
  view.append(el("h2", { textContent: "Nodes" }),
    el("div", { className: "scroll" }, el("table", { className: "list" },
      el("thead", {}, el("tr", {}, ...["Node", "Address", "Heartbeat", "Started", "Coordination", "Pool use", "Slices held"].map((h) => el("th", { scope: "col", textContent: h })))),
      tbody)));
  async function load() {
    const nl = await call("GET", "/nodes");
    if (ctx.stopped) return;
    ctx.fail(null);
    tbody.replaceChildren();
    if (nl.nodes.length === 0) tbody.append(el("tr", {}, el("td", { colSpan: 7, className: "muted", textContent: "No live nodes." })));
    for (const n of nl.nodes) {
      tbody.append(el("tr", { dataset: { id: n.id } },
        el("td", {}, el("code", { textContent: n.id })),
        el("td", { textContent: n.addr || "—" }),
        el("td", { textContent: ago(n.seen_at), title: timeTitle(n.seen_at) }),
        el("td", {}, when(n.started_at)),
        el("td", { className: "coordination", textContent: n.coordination || "—", title: coordinationTitle[n.coordination] || "" }),
        el("td", { className: "pool" }, `${n.pool.in_use} of ${n.pool.capacity} running `,
          el("meter", { min: 0, max: n.pool.capacity || 1, value: n.pool.in_use, title: "pool use" })),
        el("td", { textContent: n.slices.length ? `${n.slices.length}: ${n.slices.join(", ")}` : "none" })));
    }
  }
  ctx.every(5000, () => load().catch((e) => ctx.fail(e)));
}
