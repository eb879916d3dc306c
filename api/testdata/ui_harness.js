// ui_harness.js runs the web UI's app.js in node against a live chime
// server (TestUIScriptAgainstServer starts one with auth on), with a small
// stand-in for the DOM, and drives it like a user: the 401 sign-in form, a
// wrong token, the right one, creating and triggering a timer, signing out,
// and a read token's 403.
//
//   node ui_harness.js BASE_URL app.js index.html ADMIN_TOKEN READ_TOKEN
//
// It prints what failed and exits 1, or exits 0.
"use strict";

const fs = require("fs");
const vm = require("vm");

const [base, appJS, indexHTML, adminToken, readToken] = process.argv.slice(2);
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

// A stand-in for the few DOM features app.js uses.
class Element {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.children = [];
    this.hidden = false;
    this.className = "";
    this.value = "";
    this.listeners = {};
    this.fields = {}; // a form's inputs, for FormData
  }
  append(...cs) { for (const c of cs) this.children.push(typeof c === "object" ? c : String(c)); }
  replaceChildren(...cs) { this.children = []; this.append(...cs); }
  get textContent() { return this.children.map((c) => (typeof c === "string" ? c : c.textContent)).join(""); }
  set textContent(v) { this.children = v === "" || v == null ? [] : [String(v)]; }
  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); }
  focus() { focused = this; }
  reset() { this.fields = {}; }
  async fire(type, target = this) {
    const ev = { type, target, preventDefault() {}, stopPropagation() {} };
    for (const fn of this.listeners[type] || []) await fn(ev);
  }
  find(pred) { // depth first
    for (const c of this.children) {
      if (typeof c !== "object") continue;
      if (pred(c)) return c;
      const f = c.find(pred);
      if (f) return f;
    }
    return null;
  }
}

let focused = null;
const byId = {};
const html = fs.readFileSync(indexHTML, "utf8");
for (const m of html.matchAll(/<([a-zA-Z]+)([^>]*)>/g)) {
  const id = /\bid="([^"]+)"/.exec(m[2]);
  if (!id) continue;
  const e = new Element(m[1]);
  e.hidden = /\shidden(\s|$|=)/.test(m[2]);
  byId[id[1]] = e;
}

const store = new Map();
const requests = [];
const context = {
  console,
  document: {
    body: { dataset: { api: /data-api="([^"]+)"/.exec(html)[1] } },
    getElementById: (id) => byId[id] || null,
    createElement: (tag) => new Element(tag),
    get cookie() { throw new Error("app.js read document.cookie"); },
    set cookie(v) { throw new Error("app.js set document.cookie"); },
  },
  sessionStorage: {
    getItem: (k) => (store.has(k) ? store.get(k) : null),
    setItem: (k, v) => store.set(k, String(v)),
    removeItem: (k) => store.delete(k),
  },
  get localStorage() { throw new Error("app.js used localStorage"); },
  fetch: async (path, opts = {}) => {
    const headers = { ...(opts.headers || {}) };
    requests.push({ method: opts.method || "GET", path, headers, body: opts.body });
    inflight++;
    try { return await fetch(base + path, opts); } finally { inflight--; }
  },
  FormData: class { constructor(form) { this.f = form.fields; } get(k) { return k in this.f ? this.f[k] : null; } },
  confirm: () => true,
  setInterval: () => 0,
  encodeURIComponent,
};
context.window = context;
let inflight = 0;

// settle waits until app.js has no request in flight for a while.
async function settle() {
  for (let quiet = 0; quiet < 5;) {
    await new Promise((r) => setTimeout(r, 10));
    quiet = inflight === 0 ? quiet + 1 : 0;
  }
}

const $ = (id) => byId[id];
const last = () => requests[requests.length - 1];
const auth = (r) => r && r.headers.Authorization;

async function signIn(token) {
  $("signin-token").value = token;
  await $("signin-form").fire("submit");
  await settle();
}

(async () => {
  vm.createContext(context);
  vm.runInContext(fs.readFileSync(appJS, "utf8"), context, { filename: "app.js" });
  await settle();

  // 1. No token: the server's 401 brings up the sign-in form.
  check(requests.length > 0 && !auth(requests[0]), "the first call sends no Authorization");
  check(!$("signin").hidden, "401: the sign-in form is shown");
  check(/authentication required/.test($("signin-error").textContent), "401: the form shows the server's message: " + $("signin-error").textContent);
  check(focused === $("signin-token"), "401: the token input has the focus");
  check($("error").textContent === "", "401: no error besides the form: " + $("error").textContent);
  check($("signout").hidden, "no token: no sign-out");

  // 2. A wrong token: sent, refused, forgotten, the form again.
  await signIn("chm_wrong");
  check(requests.some((r) => auth(r) === "Bearer chm_wrong"), "the entered token is sent as Bearer");
  check(!$("signin").hidden, "wrong token: the form is back");
  check(/invalid or revoked/.test($("signin-error").textContent), "wrong token: the server's message: " + $("signin-error").textContent);
  check(!store.has("chime.token"), "wrong token: not kept");

  // 3. The admin token: kept in sessionStorage, the timers load.
  await signIn(adminToken);
  check(store.get("chime.token") === adminToken, "the token is kept in sessionStorage under chime.token");
  check($("signin").hidden, "signed in: the form is hidden");
  check(!$("signout").hidden, "signed in: sign-out is shown");
  check(auth(last()) === "Bearer " + adminToken, "signed in: calls send the token");
  check(/No timers yet/.test($("timers").textContent), "signed in: the timers table: " + $("timers").textContent);

  // 4. Create a timer: JSON body with Content-Type, then it is listed.
  const create = $("create");
  create.fields = {
    app: "ui", name: "hook", description: "", schedule: "@every 1m", timezone: "UTC", method: "POST",
    url: "https://example.com/hook", body: "", timeout: "30s", max_attempts: "1", backoff: "1s",
  };
  await create.fire("submit");
  await settle();
  const post = requests.find((r) => r.method === "POST" && r.path === "/api/v1/timers");
  check(post && post.headers["Content-Type"] === "application/json", "create sends Content-Type: application/json");
  check(post && auth(post) === "Bearer " + adminToken, "create sends the token");
  check($("error").textContent === "", "create: no error: " + $("error").textContent);
  const row = $("timers").find((e) => e.tagName === "TR" && /timer/.test(e.className));
  check(row && /hook/.test(row.textContent), "the new timer is listed: " + $("timers").textContent);
  check(!$("runs-table").hidden, "the new timer's runs are shown");

  // 5. Trigger it from its row.
  if (row) {
    const trigger = row.find((e) => e.tagName === "BUTTON" && e.textContent === "Trigger");
    await trigger.fire("click");
    await settle();
    check(requests.some((r) => r.method === "POST" && /\/trigger$/.test(r.path)), "trigger is sent");
    check($("error").textContent === "", "trigger: no error: " + $("error").textContent);
  }

  // 6. Sign out: the token is gone, the data too, the form is back.
  await $("signout").fire("click");
  await settle();
  check(!store.has("chime.token"), "sign out clears the token");
  check(!/hook/.test($("timers").textContent), "sign out clears the timers");
  check(!$("signin").hidden, "sign out: the server's 401 brings up the form");

  // 7. A read token may look but not write: the 403 message is shown.
  await signIn(readToken);
  const row2 = $("timers").find((e) => e.tagName === "TR" && /timer/.test(e.className));
  check(row2 && /hook/.test(row2.textContent), "a read token sees the timers");
  if (row2) {
    const disable = row2.find((e) => e.tagName === "BUTTON" && e.textContent === "Disable");
    await disable.fire("click");
    await settle();
    check(/this token may not POST/.test($("error").textContent), "403: the message is shown: " + $("error").textContent);
    check($("signin").hidden, "403: no sign-in form");
  }

  for (const r of requests) {
    check(!/token/i.test(r.path), "no token in a URL: " + r.path);
  }
  if (failures.length) {
    console.log(failures.join("\n"));
    process.exit(1);
  }
})().catch((e) => { console.log(e.stack || String(e)); process.exit(1); });
