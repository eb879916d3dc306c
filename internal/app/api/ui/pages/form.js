// The timer form: /timers/new creates (POST /api/v1/timers), and
// /timers/{id}/edit changes (PUT /api/v1/timers/{id}) a timer. Every action
// type the server accepts (GET /api/v1/action-types) and every policy; the schedule is checked as it is typed, with its
// next fires, through GET /api/v1/schedule/next; an error of the API is
// shown next to the field it names.

import { ApiError, call, el, enc, fill, fmtTime, query, describeSchedule, viewerZone } from "../lib.js";

// field returns a labelled input whose errors show in a <p> beside it;
// name is the API's field name ("retry.backoff").
function field(label, name, input, hint = "") {
  input.name = name;
  input.id = "f-" + name.replace(/\./g, "-");
  const err = el("p", { className: "field-error", id: input.id + "-error", attrs: { role: "alert" } });
  input.setAttribute("aria-describedby", err.id);
  return el("div", { className: "field", dataset: { field: name } },
    el("label", { htmlFor: input.id, textContent: label }), input,
    hint ? el("small", { className: "muted", textContent: hint }) : null, err);
}

const input = (props = {}) => el("input", { spellcheck: false, ...props });
const select = (values, props = {}) => el("select", props, ...values.map(([v, t]) => el("option", { value: v, textContent: t || v })));

// toLocalInput gives a datetime-local value in the viewer's zone for an
// RFC 3339 time, fromLocalInput the reverse.
function toLocalInput(s) {
  if (!s) return "";
  const d = new Date(s);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
function fromLocalInput(v) {
  return v ? new Date(v).toISOString() : undefined;
}

// headerLines turns "Name: value" lines into an object.
function parseHeaders(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const i = line.indexOf(":");
    if (i <= 0) throw new ApiError(400, "action.http.header", `"${line.trim()}" is not "Name: value"`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

export async function render(view, params, ctx) {
  const editing = params.id !== undefined;
  const [timer, types] = await Promise.all([
    editing ? call("GET", "/timers/" + enc(params.id)) : null,
    call("GET", "/action-types"),
  ]);
  if (ctx.stopped) return;

  const f = {
    app: input({ required: true, autocomplete: "off" }),
    name: input({ required: true, autocomplete: "off" }),
    description: input({}),
    schedule: input({ placeholder: "0 9 * * 1-5, @every 5m, @at 2026-01-02T15:04:05Z", autocomplete: "off" }),
    after: el("textarea", { rows: 2, placeholder: "app/name success (one upstream a line: success, failure or finish)", spellcheck: false }),
    timezone: input({ value: "UTC", placeholder: "Europe/London" }),
    enabled: el("input", { type: "checkbox", checked: true }),
    timeout: input({ value: "30s" }),
    max_attempts: input({ type: "number", min: 1, max: 100, value: 1 }),
    backoff: input({ value: "1s" }),
    max_backoff: input({ placeholder: "none" }),
    catchup_window: input({ placeholder: "no limit" }),
    misfire: select([["all", "all: run every missed fire"], ["latest", "latest: run the latest missed fire"], ["skip", "skip: run none"]]),
    overlap: select([["allow", "allow: runs may overlap"], ["skip", "skip: skip a fire while one runs"],
      ["buffer_one", "buffer_one: queue one"], ["cancel_running", "cancel_running: cancel the running one"]]),
    start_at: input({ type: "datetime-local", step: 1 }),
    end_at: input({ type: "datetime-local", step: 1 }),
    max_fires: input({ type: "number", min: 0, placeholder: "no maximum" }),
    priority: input({ type: "number", min: 0, max: 9, value: 5 }),
    jitter: input({ placeholder: "none" }),
    dst: select([["default", "default: gap once after it, overlap once"], ["shift", "shift: gap times moved by its length"],
      ["skip_gap", "skip_gap: no fire in a gap"], ["both", "both: overlap fires twice"], ["wall", "wall: no gap fire, overlap twice"]]),
    mode: select([["single", "single: once, on one node"], ["broadcast", "broadcast: once on every live node"]]),
    shards: input({ type: "number", min: 0, max: 1000, placeholder: "none" }),
    history_keep: input({ type: "number", min: 0, placeholder: "server default" }),
    history_max_age: input({ placeholder: "server default" }),
    // The action types this server accepts (shell only with
    // --allow-shell), and the timer's own when editing.
    type: select([["http", "HTTP callback"], ["handler", "Go handler"], ["shell", "shell command"]]
      .filter(([v]) => types.types.includes(v) || (timer && timer.action && timer.action.type === v))),
    method: select(["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD"].map((m) => [m])),
    url: input({ type: "url", placeholder: "https://example.com/hook" }),
    headers: el("textarea", { rows: 3, placeholder: "Name: value (one a line)", spellcheck: false }),
    body: el("textarea", { rows: 3, spellcheck: false }),
    handler: input({ placeholder: "registered handler name" }),
    args: el("textarea", { rows: 3, placeholder: '{"key": "value"}', spellcheck: false }),
    command: input({ placeholder: "/usr/local/bin/report" }),
    shell_args: el("textarea", { rows: 2, placeholder: "one argument a line", spellcheck: false }),
  };

  if (timer) {
    f.app.value = timer.app; f.name.value = timer.name; f.description.value = timer.description || "";
    f.schedule.value = timer.schedule; f.timezone.value = timer.timezone; f.enabled.checked = !!timer.enabled;
    f.after.value = (timer.after || []).map((d) => `${d.timer} ${d.on}`).join("\n");
    f.timeout.value = timer.timeout;
    const r = timer.retry || {};
    f.max_attempts.value = r.max_attempts || 1; f.backoff.value = r.backoff || ""; f.max_backoff.value = r.max_backoff || "";
    const p = timer.policy || {};
    f.catchup_window.value = p.catchup_window || ""; f.misfire.value = p.misfire || "all"; f.overlap.value = p.overlap || "allow";
    f.start_at.value = toLocalInput(p.start_at); f.end_at.value = toLocalInput(p.end_at); f.max_fires.value = p.max_fires || "";
    f.priority.value = timer.priority ?? 5;
    f.jitter.value = p.jitter || ""; f.dst.value = p.dst || "default";
    f.mode.value = timer.mode || "single"; f.shards.value = timer.shards || "";
    const h = timer.history || {};
    f.history_keep.value = h.keep ?? ""; f.history_max_age.value = h.max_age ?? "";
    const a = timer.action || {};
    f.type.value = a.type || "http";
    if (a.http) {
      f.method.value = (a.http.method || "POST").toUpperCase(); f.url.value = a.http.url || ""; f.body.value = a.http.body || "";
      f.headers.value = Object.entries(a.http.header || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
    }
    if (a.handler) { f.handler.value = a.handler.name || ""; f.args.value = a.handler.args ? JSON.stringify(a.handler.args, null, 2) : ""; }
    if (a.shell) { f.command.value = a.shell.command || ""; f.shell_args.value = (a.shell.args || []).join("\n"); }
  }

  const preview = el("div", { className: "preview", id: "schedule-preview", attrs: { "aria-live": "polite" } });
  const httpBox = el("fieldset", { id: "action-http" }, el("legend", { textContent: "HTTP callback" }),
    field("Method", "action.http.method", f.method), field("URL", "action.http.url", f.url),
    field("Headers", "action.http.header", f.headers, "Secret headers (such as Authorization) are stored encrypted and shown redacted."),
    field("Body", "action.http.body", f.body));
  const handlerBox = el("fieldset", { id: "action-handler" }, el("legend", { textContent: "Go handler" }),
    field("Handler name", "action.handler.name", f.handler), field("Arguments (JSON)", "action.handler.args", f.args));
  const shellBox = el("fieldset", { id: "action-shell" }, el("legend", { textContent: "Shell command" }),
    field("Command", "action.shell.command", f.command), field("Arguments", "action.shell.args", f.shell_args));
  const showAction = () => {
    httpBox.hidden = f.type.value !== "http";
    handlerBox.hidden = f.type.value !== "handler";
    shellBox.hidden = f.type.value !== "shell";
  };
  f.type.addEventListener("change", showAction);
  showAction();

  const formError = el("p", { className: "field-error", id: "form-error", attrs: { role: "alert" } });
  const submit = el("button", { type: "submit", textContent: editing ? "Save" : "Create timer", id: "form-submit" });
  const form = el("form", { id: "timer-form", className: "timer-form", noValidate: true },
    el("fieldset", {}, el("legend", { textContent: "Timer" }),
      field("App", "app", f.app), field("Name", "name", f.name), field("Description", "description", f.description),
      field("Enabled", "enabled", f.enabled)),
    el("fieldset", {}, el("legend", { textContent: "Schedule" }),
      field("Schedule", "schedule", f.schedule, "cron (5–7 fields), @daily…, @every 90s, @at <RFC 3339>"),
      field("Time zone", "timezone", f.timezone, "IANA name; the viewer's is " + viewerZone), preview,
      field("Runs after", "after", f.after, "timers (id or app/name) this one runs after, and how each must end; with these the schedule may be empty")),
    el("fieldset", {}, el("legend", { textContent: "Action" }), field("Type", "action.type", f.type), httpBox, handlerBox, shellBox),
    el("fieldset", {}, el("legend", { textContent: "Timeout and retries" }),
      field("Timeout", "timeout", f.timeout, "Go duration: 30s, 5m"), field("Max attempts", "retry.max_attempts", f.max_attempts),
      field("Backoff", "retry.backoff", f.backoff), field("Max backoff", "retry.max_backoff", f.max_backoff)),
    el("fieldset", {}, el("legend", { textContent: "Policy" }),
      field("Catch-up window", "policy.catchup_window", f.catchup_window, "how late a fire may still run"),
      field("Misfire", "policy.misfire", f.misfire), field("Overlap", "policy.overlap", f.overlap),
      field("Start at (" + viewerZone + ")", "policy.start_at", f.start_at), field("End at (" + viewerZone + ")", "policy.end_at", f.end_at),
      field("Max fires", "policy.max_fires", f.max_fires),
      field("Jitter", "policy.jitter", f.jitter, "Go duration: each fire is delayed by a fixed offset in [0, jitter) per timer and instant"),
      field("Daylight saving", "policy.dst", f.dst, "a fixed-time schedule's wall times that a clock change skips or repeats"),
      field("Priority", "priority", f.priority, "0 (lowest) to 9: who goes first when the pool is full")),
    el("fieldset", {}, el("legend", { textContent: "Nodes" }),
      field("Mode", "mode", f.mode), field("Shards", "shards", f.shards, "above 1: each fire runs as this many shards over the nodes")),
    el("fieldset", {}, el("legend", { textContent: "Run history" }),
      field("Keep", "history.keep", f.history_keep, "finished runs kept; empty: the server's default, 0: no limit"),
      field("Max age", "history.max_age", f.history_max_age, "Go duration (720h); empty: the server's default, 0: no limit")),
    el("div", { className: "actions" }, submit, el("a", { href: editing ? "/timers/" + enc(params.id) : "/timers", textContent: "Cancel" })),
    formError);
  view.append(el("h2", { textContent: editing ? `Edit ${timer.app}/${timer.name}` : "New timer" }), form);

  // The schedule is checked as it is typed (after a short pause).
  let seq = 0, timerId = 0;
  const schedErr = form.querySelector("#f-schedule-error");
  async function check() {
    const mine = ++seq;
    const spec = f.schedule.value.trim();
    if (!spec) { preview.replaceChildren(); schedErr.textContent = ""; return; }
    try {
      const r = await call("GET", "/schedule/next" + query({ spec, tz: f.timezone.value.trim() || "UTC", n: 5, dst: f.dst.value }));
      if (mine !== seq) return;
      schedErr.textContent = "";
      f.schedule.removeAttribute("aria-invalid");
      const words = describeSchedule(spec, f.timezone.value.trim() || "UTC");
      fill(preview,
        words ? el("p", { textContent: words }) : null,
        r.times.length ? el("p", { className: "muted", textContent: "Next fires:" }) : el("p", { className: "muted", textContent: "No fires ahead." }),
        el("ol", { className: "fires" }, ...r.times.map((t) => el("li", { textContent: `${fmtTime(t, f.timezone.value.trim() || "UTC")} · ${fmtTime(t)}` }))));
    } catch (e) {
      if (mine !== seq) return;
      preview.replaceChildren();
      const target = e.field === "tz" ? form.querySelector("#f-timezone-error") : schedErr;
      target.textContent = e.detail || e.message;
      (e.field === "tz" ? f.timezone : f.schedule).setAttribute("aria-invalid", "true");
    }
  }
  const soon = () => { clearTimeout(timerId); timerId = setTimeout(check, 200); };
  f.schedule.addEventListener("input", soon);
  f.timezone.addEventListener("input", () => { form.querySelector("#f-timezone-error").textContent = ""; soon(); });
  f.dst.addEventListener("change", soon);
  if (f.schedule.value) check();

  function clearErrors() {
    for (const p of form.querySelectorAll(".field-error")) p.textContent = "";
    for (const i of form.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
  }
  function showError(e) {
    // after[1].timer is shown on the after field.
    const name = e.field && e.field.startsWith("after") ? "after" : e.field;
    const box = name && form.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (box) {
      box.querySelector(".field-error").textContent = e.detail || e.message;
      const i = box.querySelector("input, select, textarea");
      i.setAttribute("aria-invalid", "true");
      i.focus();
    } else {
      formError.textContent = e.message || String(e);
    }
  }

  function body() {
    const t = {
      app: f.app.value.trim(), name: f.name.value.trim(), description: f.description.value,
      schedule: f.schedule.value.trim(), timezone: f.timezone.value.trim() || "UTC", enabled: f.enabled.checked,
      timeout: f.timeout.value.trim(),
      retry: { max_attempts: Number(f.max_attempts.value || 1), backoff: f.backoff.value.trim(), max_backoff: f.max_backoff.value.trim() },
      policy: {
        catchup_window: f.catchup_window.value.trim(), misfire: f.misfire.value, overlap: f.overlap.value,
        start_at: fromLocalInput(f.start_at.value), end_at: fromLocalInput(f.end_at.value),
        max_fires: Number(f.max_fires.value || 0),
        jitter: f.jitter.value.trim(), dst: f.dst.value,
      },
    };
    if (f.mode.value !== "single") t.mode = f.mode.value;
    if (Number(f.shards.value || 0) > 1) t.shards = Number(f.shards.value);
    // history: only what is set, so that the rest follows the server.
    const history = {};
    if (f.history_keep.value.trim() !== "") history.keep = Number(f.history_keep.value);
    if (f.history_max_age.value.trim() !== "") history.max_age = f.history_max_age.value.trim();
    if (Object.keys(history).length) t.history = history;
    if (f.priority.value.trim() !== "") t.priority = Number(f.priority.value);
    // Notification rules have no form yet: an edit keeps the timer's.
    if (timer && timer.notify) t.notify = timer.notify;
    if (timer) t.id = timer.id;
    // after: "timer on" lines; a bad line is reported on the field.
    const after = [];
    for (const line of f.after.value.split("\n")) {
      if (!line.trim()) continue;
      const [up, on, ...rest] = line.trim().split(/\s+/);
      if (!on || rest.length) throw new ApiError(400, "after", `"${line.trim()}" is not "timer success|failure|finish"`);
      after.push({ timer: up, on });
    }
    if (after.length) t.after = after;
    const type = f.type.value;
    if (type === "http") {
      t.action = { type, http: { method: f.method.value, url: f.url.value.trim(), header: parseHeaders(f.headers.value), body: f.body.value } };
      // The form has no field for them: an edit keeps the timer's.
      const sh = timer && timer.action && timer.action.http && timer.action.http.secret_headers;
      if (sh) t.action.http.secret_headers = sh;
    } else if (type === "handler") {
      let args;
      if (f.args.value.trim()) {
        try { args = JSON.parse(f.args.value); } catch (err) { throw new ApiError(400, "action.handler.args", "is not JSON: " + err.message); }
      }
      t.action = { type, handler: { name: f.handler.value.trim(), args } };
      const sa = timer && timer.action && timer.action.handler && timer.action.handler.secret_args;
      if (sa) t.action.handler.secret_args = sa;
    } else {
      t.action = { type, shell: { command: f.command.value.trim(), args: f.shell_args.value.split("\n").filter((s) => s !== "") } };
    }
    return t;
  }

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors();
    submit.disabled = true;
    try {
      const b = body();
      const saved = editing ? await call("PUT", "/timers/" + enc(timer.id), b) : await call("POST", "/timers", b);
      ctx.navigate("/timers/" + enc(saved.id));
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) showError(e);
    } finally {
      submit.disabled = false;
    }
  });
  f.app.focus();
}
