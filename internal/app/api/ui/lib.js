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

// enc encodes a path segment.
export const enc = encodeURIComponent;

// statusBadge shows a run status as text with a colour class.
export function statusBadge(status) {
  return el("span", { className: "badge status-" + (status || "none"), textContent: status || "no runs" });
}

const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
export { viewerZone };

// fmtTime formats an RFC 3339 time in zone (the viewer's by default) as
// "2026-03-01 10:30:00 GMT+1"; "" for none.
export function fmtTime(s, zone = viewerZone) {
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

// lineChart returns a figure with an SVG chart of the series (each
// {name, values, cls}) over the same x steps, its caption saying the
// latest and largest values in words (for screen readers too).
export function lineChart(title, series, unit, id) {
  const W = 600, H = 120, P = 4;
  const all = series.flatMap((s) => s.values);
  const top = Math.max(1e-9, ...all);
  const n = Math.max(1, ...series.map((s) => s.values.length - 1));
  const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
  const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
    "aria-label": `${title}: ` + series.map((s) => `${s.name} now ${fmt(s.values[s.values.length - 1] || 0)} ${unit}, at most ${fmt(Math.max(0, ...s.values))}`).join("; ") },
    svg("line", { x1: 0, y1: H - P, x2: W, y2: H - P, class: "axis" }),
    ...series.map((s) => svg("polyline", { class: "line " + (s.cls || ""), "vector-effect": "non-scaling-stroke",
      points: s.values.map((v, i) => `${(i / n) * W},${H - P - (v / top) * (H - 2 * P)}`).join(" ") })));
  const legend = series.map((s) => `${s.name}: ${fmt(s.values[s.values.length - 1] || 0)} now, ${fmt(Math.max(0, ...s.values))} at most`).join(" · ");
  return el("figure", { className: "chart", id },
    el("figcaption", {}, el("strong", { textContent: title }), el("span", { className: "muted", textContent: ` (${unit}, last hour) ` }),
      el("div", { className: "muted", textContent: legend })),
    plot);
}
