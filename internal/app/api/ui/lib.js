// lib.js: what every page of chime's web UI shares: the one API call
// wrapper (call), the token kept in this tab's session storage, element
// building (el, never HTML strings) and formatting of times, durations
// and schedules.
//
// Every API call goes through call(). When the server answers 401, the
// token (if any) is forgotten and the sign-in prompt is shown; after a
// sign-in the page that asked is drawn again.

export const API = document.body.dataset.api || "/api/v1";
const TOKEN_KEY = "chime.token";

// ApiError is a failed call: the HTTP status, the field the server named
// (if any) and its message.
export class ApiError extends Error {
  constructor(status, field, message) {
    super((field ? field + ": " : "") + message);
    this.status = status;
    this.field = field || "";
    this.detail = message;
  }
}

export function storedToken() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("signout").hidden = !token;
}

let onUnauthorized = () => {};

// whenUnauthorized sets what a 401 does (app.js shows the sign-in prompt).
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

// call sends one API request and returns the decoded JSON answer (null for
// 204). A failed answer throws an ApiError; a 401 also asks for a token.
export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = storedToken();
  if (token) headers.Authorization = "Bearer " + token;
  const opts = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, opts);
  let data = null;
  if (res.status !== 204) {
    try { data = await res.json(); } catch { data = null; }
  }
  if (res.ok) return data;
  const e = (data && data.error) || {};
  const message = e.message || `${res.status} ${res.statusText}`.trim();
  if (res.status === 401) {
    if (token) setToken("");
    onUnauthorized(message);
  }
  throw new ApiError(res.status, e.field, message);
}

// query builds "?a=1&b=2" from the non-empty values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

// el returns a new element with props (properties, not attributes; a
// "dataset" object and "attrs" for attributes such as aria-*) and children
// (nodes or strings, null skipped).
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "attrs") for (const [a, av] of Object.entries(v)) e.setAttribute(a, av);
    else e[k] = v;
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

// fill replaces parent's children with children, leaving out null,
// undefined and false as el does (replaceChildren would write them as
// text: "null").
export function fill(parent, ...children) {
  parent.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

// link returns an <a> to an in-app path (app.js routes clicks on it).
export function link(href, text, props = {}) {
  return el("a", { href, textContent: text, ...props });
}

// confirmBox shows, in place of the buttons, a question with a button
// that does fn and one that cancels (Escape too); focus goes to the
// first, and back to the button that asked when cancelled.
export function confirmBox(bar, question, label, fn) {
  const asker = document.activeElement;
  const box = el("div", { className: "confirm", attrs: { role: "alertdialog", "aria-label": question } });
  const yes = el("button", { type: "button", className: "danger", textContent: label, id: "confirm-yes" });
  const no = el("button", { type: "button", textContent: "Cancel", id: "confirm-no" });
  box.append(el("span", { textContent: question }), yes, no);
  bar.hidden = true;
  bar.after(box);
  const close = () => { box.remove(); bar.hidden = false; };
  const cancel = () => { close(); if (asker && asker.isConnected) asker.focus(); };
  yes.addEventListener("click", async () => { close(); await fn(); });
  no.addEventListener("click", cancel);
  box.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { ev.preventDefault(); cancel(); } });
  yes.focus();
}

// enc encodes a path segment.
export const enc = encodeURIComponent;

// statusBadge shows a run status as text with a colour class.
export function statusBadge(status) {
  return el("span", { className: "badge status-" + (status || "none"), textContent: status || "no runs" });
}

const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
export { viewerZone };

// The viewer's choices, kept in this browser (local storage): how times
// are shown (TIME_MODES) and the colour theme (THEMES).
const TIME_KEY = "chime.time";
const THEME_KEY = "chime.theme";
export const TIME_MODES = { relative: "Relative times", local: "Local time", utc: "UTC" };
export const THEMES = { system: "System theme", light: "Light", dark: "Dark" };

function stored(key, allowed, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v && v in allowed ? v : fallback;
  } catch {
    return fallback;
  }
}

function keep(key, value) {
  try { localStorage.setItem(key, value); } catch { /* storage off: for this page only */ }
}

// timeMode is how times are shown: "relative" (the default), "local" or "utc".
export function timeMode() {
  return stored(TIME_KEY, TIME_MODES, "relative");
}

export function setTimeMode(mode) {
  keep(TIME_KEY, mode);
}

// theme is the colour theme chosen: "system" (the default), "light" or
// "dark"; applyTheme sets it on the page (app.css reads data-theme).
export function theme() {
  return stored(THEME_KEY, THEMES, "system");
}

export function applyTheme(value) {
  if (value) keep(THEME_KEY, value);
  document.documentElement.dataset.theme = theme();
}

// zoneLabel names where the times shown without a zone are: the viewer's
// zone, UTC, or "from now".
export function zoneLabel() {
  return { relative: "from now", local: viewerZone, utc: "UTC" }[timeMode()];
}

// absTime formats an RFC 3339 time in zone as "2026-03-01 10:30:00 GMT+1";
// "" for none.
export function absTime(s, zone = viewerZone) {
  if (!s) return "";
  const d = new Date(s);
  if (isNaN(d)) return s;
  try {
    const parts = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
    }).formatToParts(d);
    const p = Object.fromEntries(parts.map((x) => [x.type, x.value]));
    return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
  } catch {
    return d.toISOString();
  }
}

// relTime says how far from now the time s is: "3 min ago", "in 20 s",
// "now".
export function relTime(s, now = Date.now()) {
  const d = new Date(s).getTime();
  if (isNaN(d)) return s || "";
  const sec = Math.round((d - now) / 1000), a = Math.abs(sec);
  if (a < 1) return "now";
  let n;
  if (a < 60) n = `${a} s`;
  else if (a < 3600) n = `${Math.floor(a / 60)} min`;
  else if (a < 86400) n = `${Math.floor(a / 3600)} h` + (a < 36000 && Math.floor(a / 60) % 60 ? ` ${Math.floor(a / 60) % 60} min` : "");
  else n = `${Math.floor(a / 86400)} d` + (a < 864000 && Math.floor(a / 3600) % 24 ? ` ${Math.floor(a / 3600) % 24} h` : "");
  return sec > 0 ? "in " + n : n + " ago";
}

// fmtTime formats an RFC 3339 time: in zone when one is given, else as the
// viewer chose (timeMode: relative, the viewer's zone, or UTC); "" for none.
export function fmtTime(s, zone) {
  if (!s) return "";
  if (zone) return absTime(s, zone);
  const mode = timeMode();
  if (mode === "relative") return relTime(s);
  return absTime(s, mode === "utc" ? "UTC" : viewerZone);
}

// timeTitle is the hover text of a time: absolute, in the viewer's zone
// and in UTC.
export function timeTitle(s) {
  return `${absTime(s)} · ${absTime(s, "UTC")}`;
}

// when returns a <time> element showing s as fmtTime does, with the
// absolute time on hover; a relative one is kept up to date while shown.
export function when(s, props = {}) {
  if (!s) return el("span", { className: "muted", textContent: "—", ...props });
  return el("time", { className: "when", dateTime: s, textContent: fmtTime(s), title: timeTitle(s), ...props });
}

// Relative times age: redrawn every 5 s, in a browser (not where the
// module is imported for its functions alone, as the tests do).
if (typeof window !== "undefined") {
  setInterval(() => {
    if (timeMode() !== "relative") return;
    for (const t of document.querySelectorAll("time.when")) t.textContent = relTime(t.dateTime);
  }, 5000);
}

// offsetOf returns the UTC offset of an RFC 3339 time as written ("+01:00").
export function offsetOf(s) {
  const m = /([+-]\d\d:\d\d|Z)$/.exec(s || "");
  return m ? (m[1] === "Z" ? "+00:00" : m[1]) : "";
}

// fmtDuration formats milliseconds as "850 ms", "12.3 s", "4m05s".
export function fmtDuration(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return "";
  const neg = ms < 0;
  ms = Math.abs(ms);
  let s;
  if (ms < 1000) s = `${Math.round(ms)} ms`;
  else if (ms < 60000) s = `${(ms / 1000).toFixed(1)} s`;
  else if (ms < 3600000) s = `${Math.floor(ms / 60000)}m${String(Math.floor(ms / 1000) % 60).padStart(2, "0")}s`;
  else s = `${Math.floor(ms / 3600000)}h${String(Math.floor(ms / 60000) % 60).padStart(2, "0")}m`;
  return (neg ? "-" : "") + s;
}

// ago says how long before now the time s was ("3 s ago").
export function ago(s) {
  if (!s) return "";
  return fmtDuration(Date.now() - new Date(s).getTime()) + " ago";
}

// pretty returns s pretty-printed when it is JSON, else s.
export function pretty(s) {
  if (!s) return "";
  const t = s.trim();
  if (!(t.startsWith("{") || t.startsWith("["))) return s;
  try { return JSON.stringify(JSON.parse(t), null, 2); } catch { return s; }
}

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const DAY_NAMES = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };
const MONTHS = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
  "October", "November", "December"];
const MONTH_NAMES = { JAN: 1, FEB: 2, MAR: 3, APR: 4, MAY: 5, JUN: 6, JUL: 7, AUG: 8, SEP: 9, OCT: 10, NOV: 11, DEC: 12 };
const DESCRIPTORS = {
  "@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
  "@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *",
  "@hourly": "0 0 * * * *", "@minutely": "0 * * * * *",
};

const isNum = (f) => /^\d+$/.test(f);
const pad = (n) => String(n).padStart(2, "0");

function dayName(f) {
  const n = isNum(f) ? Number(f) : DAY_NAMES[f.toUpperCase()];
  return n === undefined ? null : DAYS[n];
}

function daysInWords(dow) {
  const d = dow.toUpperCase();
  if (d === "1-5" || d === "MON-FRI") return "on weekdays";
  if (d === "0,6" || d === "6,0" || d === "SAT,SUN" || d === "SUN,SAT" || d === "6-7" || d === "SAT-SUN") return "at weekends";
  const names = d.split(",").map(dayName);
  if (names.every((n) => n)) return "on " + names.join(", ");
  const r = /^(\w+)-(\w+)$/.exec(d);
  if (r && dayName(r[1]) && dayName(r[2])) return `${dayName(r[1])} to ${dayName(r[2])}`;
  return null;
}

// describeSchedule says a spec in words ("at 09:00 on weekdays,
// Europe/London"), or returns "" for what it does not know how to say (the
// spec is always shown beside it).
export function describeSchedule(spec, zone) {
  let s = (spec || "").trim();
  const tz = /^(?:CRON_TZ|TZ)=(\S+)\s+/.exec(s);
  if (tz) { zone = tz[1]; s = s.slice(tz[0].length); }
  const suffix = zone ? ", " + zone : "";
  if (s.startsWith("@every ")) return "every " + s.slice(7).trim();
  if (s.startsWith("@at ")) return "once, at " + fmtTime(s.slice(4).trim(), zone || "UTC");
  if (DESCRIPTORS[s]) s = DESCRIPTORS[s];
  let f = s.split(/\s+/);
  if (f.length === 5) f = ["0", ...f];
  if (f.length === 7) {
    if (f[6] !== "*" && f[6] !== "?") return "";
    f = f.slice(0, 6);
  }
  if (f.length !== 6) return "";
  const [sec, min, hour, dom, mon, dow] = f;
  const any = (x) => x === "*" || x === "?";
  let time;
  if (isNum(sec) && isNum(min) && isNum(hour)) {
    time = `at ${pad(hour)}:${pad(min)}` + (sec !== "0" ? ":" + pad(sec) : "");
  } else if (isNum(sec) && isNum(min) && any(hour)) {
    time = min === "0" && sec === "0" ? "every hour" : `every hour at minute ${min}` + (sec !== "0" ? `:${pad(sec)}` : "");
  } else if (isNum(sec) && /^\*\/\d+$/.test(min) && any(hour)) {
    time = `every ${min.slice(2)} minutes`;
  } else if (isNum(sec) && any(min) && any(hour)) {
    time = "every minute";
  } else if (/^\*\/\d+$/.test(sec) && any(min) && any(hour)) {
    time = `every ${sec.slice(2)} seconds`;
  } else if (any(sec) && any(min) && any(hour)) {
    time = "every second";
  } else {
    return "";
  }
  const parts = [time];
  if (!any(dom)) {
    if (isNum(dom)) parts.push(`on day ${dom} of the month`);
    else if (dom.toUpperCase() === "L") parts.push("on the last day of the month");
    else return "";
  }
  if (!any(mon)) {
    const m = isNum(mon) ? Number(mon) : MONTH_NAMES[mon.toUpperCase()];
    if (!m) return "";
    parts.push("in " + MONTHS[m]);
  }
  if (!any(dow)) {
    const w = daysInWords(dow);
    if (!w) return "";
    parts.push(any(dom) ? w : "or " + w);
  }
  return parts.join(" ") + suffix;
}

const SVG_NS = "http://www.w3.org/2000/svg";

// svg returns a new SVG element with attributes attrs.
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  for (const c of children) if (c) e.append(c);
  return e;
}

// niceTop rounds v up to 1, 2 or 5 times a power of ten: the top of a
// chart's y axis.
function niceTop(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((x) => x >= v * (1 - 1e-9));
}

// axisTime labels a time of a chart's x axis: a clock time in the
// viewer's choice of zone, or minutes from now.
function axisTime(s, last) {
  const mode = timeMode();
  if (mode === "relative") return last ? "now" : relTime(s);
  return absTime(s, mode === "utc" ? "UTC" : viewerZone).slice(11, 16);
}

// lineChart returns a figure with an SVG chart of the series (each
// {name, values, cls}) over the same x steps (times: the start of each),
// with a y axis from 0, an x axis of times, the values of the step under
// the pointer on hover, and a caption saying the latest and largest values
// in words (for screen readers too).
export function lineChart(title, series, unit, id, times = []) {
  const W = 600, H = 120;
  const all = series.flatMap((s) => s.values);
  const top = niceTop(Math.max(0, ...all));
  const n = Math.max(1, ...series.map((s) => s.values.length - 1));
  const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
  const tick = (v) => String(+v.toPrecision(3));
  const y = (v) => H - (v / top) * H;
  const guide = svg("line", { x1: 0, y1: 0, x2: 0, y2: H, class: "guide", "vector-effect": "non-scaling-stroke", visibility: "hidden" });
  const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
    "aria-label": `${title}: ` + series.map((s) => `${s.name} now ${fmt(s.values[s.values.length - 1] || 0)} ${unit}, at most ${fmt(Math.max(0, ...s.values))}`).join("; ") },
    ...[0.5, 1].map((f) => svg("line", { x1: 0, y1: y(top * f), x2: W, y2: y(top * f), class: "grid", "vector-effect": "non-scaling-stroke" })),
    svg("line", { x1: 0, y1: H, x2: W, y2: H, class: "axis", "vector-effect": "non-scaling-stroke" }),
    ...series.map((s) => svg("polyline", { class: "line " + (s.cls || ""), "vector-effect": "non-scaling-stroke",
      points: s.values.map((v, i) => `${(i / n) * W},${y(v)}`).join(" ") })),
    guide);
  const yAxis = el("div", { className: "y-axis", attrs: { "aria-hidden": "true" } },
    ...[top, top / 2, 0].map((v) => el("span", { className: "tick", textContent: tick(v) })));
  const xAxis = el("div", { className: "x-axis", attrs: { "aria-hidden": "true" } },
    ...(times.length > 1 ? [0, 0.25, 0.5, 0.75, 1].map((f) => {
      const t = times[Math.round(f * (times.length - 1))];
      return el("span", { className: "tick", textContent: axisTime(t, f === 1), title: timeTitle(t) });
    }) : []));
  const tip = el("div", { className: "tip", hidden: true, attrs: { role: "status" } });
  const area = el("div", { className: "plot-area" }, plot, tip);
  // The step under the pointer: its time and each series' value.
  area.addEventListener("pointermove", (ev) => {
    const box = plot.getBoundingClientRect();
    if (box.width <= 0) return;
    const i = Math.max(0, Math.min(n, Math.round(((ev.clientX - box.left) / box.width) * n)));
    const at = times[i] ? axisTime(times[i], i === times.length - 1) : "";
    tip.textContent = (at ? at + ": " : "") + series.map((s) => `${s.name} ${fmt(s.values[i] || 0)}`).join(", ") + " " + unit;
    tip.hidden = false;
    tip.classList.toggle("left", i > n / 2);
    guide.setAttribute("x1", (i / n) * W);
    guide.setAttribute("x2", (i / n) * W);
    guide.setAttribute("visibility", "visible");
  });
  area.addEventListener("pointerleave", () => { tip.hidden = true; guide.setAttribute("visibility", "hidden"); });
  const legend = series.map((s) => `${s.name}: ${fmt(s.values[s.values.length - 1] || 0)} now, ${fmt(Math.max(0, ...s.values))} at most`).join(" · ");
  return el("figure", { className: "chart", id },
    el("figcaption", {}, el("strong", { textContent: title }), el("span", { className: "muted", textContent: ` (${unit}, last hour) ` }),
      el("div", { className: "muted", textContent: legend })),
    el("div", { className: "plot" }, yAxis, area, el("span"), xAxis));
}

// firstTimer returns the empty state of a fresh install: how to make a
// first timer with the form, the CLI or curl.
export function firstTimer() {
  const origin = location.origin;
  const cli = "chime timer create --app demo --name ping --schedule '@every 1m' --url http://127.0.0.1:9000/ping";
  const curl = `curl -s -X POST ${origin}${API}/timers -H 'Content-Type: application/json' -H "Authorization: Bearer $CHIME_TOKEN" -d '{\n` +
    `  "app": "demo", "name": "ping", "schedule": "@every 1m",\n` +
    `  "action": {"type": "http", "http": {"method": "POST", "url": "http://127.0.0.1:9000/ping"}}}'`;
  return el("section", { className: "empty", id: "empty-state" },
    el("h3", { textContent: "No timers yet" }),
    el("p", {}, "A timer calls a URL (or a handler, or a command) on a schedule. Make a first one with ",
      link("/timers/new", "the form", { id: "empty-new" }), ", or from a shell:"),
    el("p", { className: "muted", textContent: "With the CLI (CHIME_TOKEN holds the token, when the server asks for one):" }),
    el("pre", { id: "empty-cli", textContent: cli }),
    el("p", { className: "muted", textContent: "With curl:" }),
    el("pre", { id: "empty-curl", textContent: curl }),
    el("p", { className: "muted" }, "To see the calls arrive, run ", el("code", { textContent: "chime echo --listen 127.0.0.1:9000" }), " beside it."));
}
