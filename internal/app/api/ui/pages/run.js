// The Run page (/runs/{id}): status (retrying with the instant of the
// retry), times with the delay, the duration, the node, the HTTP status and
// response headers of the last answer, every recorded attempt as a
// timeline (when, where, how long, the outcome, the HTTP status, the error
// and output), the output and error of the last attempt (pretty-printed
// when JSON), and the request that its last attempt sent, as the executor
// recorded it with the result (secrets redacted): an HTTP request as
// method, URL, headers and body; a handler's or shell command's as JSON.
// Run again… (asking first) makes a new manual run of the same timer
// and opens it.

import { call, confirmBox, el, enc, fmtDuration, fmtTime, link, pretty, statusBadge, when } from "../lib.js";

export async function render(view, params, ctx) {
  const dl = el("dl", { className: "def", id: "run-def" });
  const out = el("pre", { id: "run-output" });
  const err = el("pre", { id: "run-error", className: "error-text" });
  const req = el("pre", { id: "run-request" });
  const title = el("h2", { textContent: "Run" });
  const bar = el("div", { className: "toolbar", id: "run-actions" }, rerunButton(params.id, ctx));
  const attempts = el("ol", { className: "timeline", id: "run-attempts" });
  const headers = el("pre", { id: "run-response-headers" });
  view.append(title, bar, dl,
    el("section", {}, el("h3", { textContent: "Attempts" }), attempts),
    el("section", {}, el("h3", { textContent: "Error" }), err),
    el("section", {}, el("h3", { textContent: "Output" }), out),
    el("section", {}, el("h3", { textContent: "Request" }),
      el("p", { className: "muted", id: "run-request-note", textContent: "What the last attempt sent; secrets are redacted." }), req),
    el("section", {}, el("h3", { textContent: "Response headers" }),
      el("p", { className: "muted", textContent: "What the receiver answered to the last attempt; secret-named headers are redacted." }), headers));
  const note = view.querySelector("#run-request-note");

  let timer = null;
  async function load() {
    const r = await call("GET", "/runs/" + enc(params.id));
    if (ctx.stopped) return;
    if (!timer) timer = await call("GET", "/timers/" + enc(r.timer_id)).catch(() => null);
    if (ctx.stopped) return;
    title.replaceChildren("Run of ", timer ? link("/timers/" + enc(timer.id), `${timer.app} / ${timer.name}`) : r.timer_id, " ", statusBadge(r.status));
    const delay = r.started_at ? new Date(r.started_at) - new Date(r.due_at) : null;
    const row = (k, ...v) => [el("dt", { textContent: k }), el("dd", {}, ...v)];
    dl.replaceChildren(
      ...row("ID", el("code", { textContent: r.id })),
      ...row("Status", statusBadge(r.status), r.manual ? " (manual)" : "",
        r.next_attempt_at ? el("span", { id: "run-next-attempt", textContent: " · next attempt " + fmtTime(r.next_attempt_at) }) : ""),
      ...(r.rerun_of ? row("Rerun of", link("/runs/" + enc(r.rerun_of), r.rerun_of, { id: "run-rerun-of" }),
        el("span", { className: "muted", textContent: " · sends its scheduled instant " + fmtTime(r.rerun_scheduled_at) })) : []),
      ...(r.upstream_run_id ? row("After run", link("/runs/" + enc(r.upstream_run_id), r.upstream_run_id, { id: "run-upstream" })) : []),
      ...row("Attempt", String(r.attempt) + (timer ? ` of ${timer.retry.max_attempts}` : "")),
      ...row("Scheduled", when(r.scheduled_at), timer ? el("span", { className: "muted", textContent: " · " + fmtTime(r.scheduled_at, timer.timezone) }) : null),
      ...row("Due", when(r.due_at)),
      ...row("Started", ...(r.started_at ? [when(r.started_at), ` (delay ${fmtDuration(delay)} after due)`] : ["not yet"])),
      ...row("Finished", r.finished_at ? when(r.finished_at) : "not yet"),
      ...row("Duration", r.finished_at ? fmtDuration(r.duration_ms) : ""),
      ...row("Node", r.node || "—"),
      ...(r.http_status ? row("HTTP status", el("span", { id: "run-http-status", textContent: String(r.http_status) })) : []));
    const as = r.attempts || [];
    attempts.replaceChildren(...(as.length ? as.map(attemptItem) :
      [el("li", { className: "muted", textContent: "No attempt recorded yet." })]));
    headers.textContent = headerText(r.response_headers) || "none";
    err.textContent = pretty(r.error) || "none";
    out.textContent = pretty(r.output) || "none";
    if (r.request) {
      note.textContent = "What the last attempt sent; secrets are redacted.";
      req.textContent = sentText(r.request);
    } else {
      note.textContent = "No request recorded: the run has not been attempted, was skipped, or ran on a version that did not record it." +
        (timer ? " The timer's action now:" : "");
      req.textContent = timer ? pretty(JSON.stringify(timer.action)) : "none";
    }
    return r;
  }
  const r = await load();
  // A run that has not ended (pending, retrying, running) is shown until
  // it has.
  const ended = (x) => ["succeeded", "failed", "skipped", "cancelled"].includes(x.status);
  if (r && !ended(r)) {
    ctx.every(2000, () => load().then((x) => { if (x && ended(x)) ctx.stop(); }).catch((e) => ctx.fail(e)));
  }
}

// attemptFacts is the line that sums up a recorded attempt: its number,
// node, start, duration and HTTP status (its outcome is the badge beside).
export function attemptFacts(a, zone) {
  const parts = ["#" + a.attempt, a.node ? "on " + a.node : "", fmtTime(a.started_at, zone), fmtDuration(a.duration_ms)];
  if (a.http_status) parts.push("HTTP " + a.http_status);
  return parts.filter(Boolean).join(" · ");
}

// attemptItem shows one attempt of the timeline: its outcome and facts,
// its error and its output (folded).
function attemptItem(a) {
  const li = el("li", { className: "attempt", dataset: { attempt: String(a.attempt), status: a.status } },
    el("div", {}, statusBadge(a.status), " ", el("span", { className: "attempt-facts", textContent: attemptFacts(a) })));
  if (a.error) li.append(el("pre", { className: "error-text", textContent: pretty(a.error) }));
  if (a.output) li.append(el("details", {}, el("summary", { textContent: "Output" }), el("pre", { textContent: pretty(a.output) })));
  return li;
}

// headerText shows response headers as "Name: value" lines, by name.
export function headerText(h) {
  return Object.keys(h || {}).sort().map((k) => `${k}: ${h[k]}`).join("\n");
}

// sentText shows a recorded request: an HTTP one as its request line,
// headers and body (pretty-printed when JSON), the others as JSON.
export function sentText(q) {
  if (q.type !== "http") return pretty(JSON.stringify(q));
  const lines = [`${q.method} ${q.url}`];
  for (const [k, v] of Object.entries(q.header || {})) lines.push(`${k}: ${v}`);
  return lines.join("\n") + (q.body ? "\n\n" + pretty(q.body) : "");
}

// rerunButton returns Run again…: it asks first, then makes a new manual
// run of the same timer, with the same action and this run's scheduled
// instant (POST /api/v1/runs/{id}/rerun), and opens it.
function rerunButton(id, ctx) {
  const button = el("button", { type: "button", textContent: "Run again…", id: "run-rerun" });
  button.addEventListener("click", () => confirmBox(button.parentElement,
    "Run this again now? A new manual run of the same timer, with the same action and this run's scheduled time.", "Run again",
    async () => {
      try {
        const r = await call("POST", `/runs/${enc(id)}/rerun`);
        ctx.navigate("/runs/" + enc(r.id));
      } catch (e) {
        ctx.fail(e);
      }
    }));
  return button;
}
