// The browser page's entry: payloads from the app's JSON API, the place in the URL's hash
// (#/launch/<i>/program/<x,y,z>/op/<seq>, then the Compiled panel's /compiled/<target>/<stage>/line/<file>:<line>),
// plotly.js from the app's /vendor/, request URLs from the route table the server put on the page. The
// viewer is view.js.
import { apiUrl, pageRoutes } from "./routes.js";
import { parsePlace, placeKey } from "./places.js";
import { mount } from "./view.js";

const ROUTES = pageRoutes(document.body);

// The trace behind the server is frozen, so an answer never changes: keep the recent ones (and the
// requests in flight, so a prefetch and the click that follows it share one request).
const CACHE = new Map(), CACHE_SIZE = 256;

// A shared server's token, from the page's own URL (?token=), sent as a header (there is no cookie).
// X-TT-Client marks a request as this page's: a page on another site cannot send a custom header to the
// server (that needs a CORS preflight, which the server never approves), so the server refuses API
// requests without it (triton_trace/view/app.py, CLIENT_HEADER).
const TOKEN = new URLSearchParams(location.search).get("token");
const HEADERS = { Accept: "application/json", "X-TT-Client": "1", ...(TOKEN ? { "X-TT-Token": TOKEN } : {}) };

async function fetchJson(path) {
  const r = await fetch(path, { credentials: "same-origin", headers: HEADERS });
  const body = await r.json().catch(() => ({ error: `${r.status} ${r.statusText}` }));
  return r.ok ? { body } : { error: body.error || `request failed with ${r.status}` };
}

function request(path) {
  let p = CACHE.get(path);
  if (p) { CACHE.delete(path); CACHE.set(path, p); return p; }
  p = fetchJson(path).catch((e) => ({ error: `cannot reach the triton_trace server (${e.message})`, retry: true }));
  p.then((res) => { if (res.retry) CACHE.delete(path); });
  CACHE.set(path, p);
  if (CACHE.size > CACHE_SIZE) CACHE.delete(CACHE.keys().next().value);
  return p;
}

let plotlyReady = null;
function plotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyReady) plotlyReady = injectPlotly();
  return plotlyReady;
}

async function injectPlotly() {
  // plotly.js skips injecting its bundled <style> blocks when an element with their id exists; the page's
  // CSP forbids inline styles, so place those ids first (plotly's own rules go to #plotly.js-style-global)
  const guards = await fetch("/vendor/plotly-guards.json", { credentials: "same-origin" }).then((r) => r.json());
  for (const id of guards.ids) {
    if (!document.getElementById(id)) { const m = document.createElement("meta"); m.id = id; document.head.append(m); }
  }
  await new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = "/vendor/plotly.min.js";
    s.addEventListener("load", resolve);
    s.addEventListener("error", () => reject(new Error("could not load /vendor/plotly.min.js")));
    document.head.append(s);
  });
  return window.Plotly;
}

// A file from the API (it needs the headers above, so not a plain link): fetched, then saved from a blob.
async function download(path, filename) {
  const r = await fetch(path, { credentials: "same-origin", headers: { ...HEADERS, Accept: "application/octet-stream" } });
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    return { error: body.error || `download failed with ${r.status} ${r.statusText}` };
  }
  const url = URL.createObjectURL(await r.blob());
  const a = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);    // the browser has taken the file by then
  return {};
}

const viewer = mount(document.body, {
  request,
  routes: ROUTES,
  plotly,
  download,
  // pushState is cheaper than assigning location.hash and waiting for hashchange; Back / Forward come in
  // as popstate, a hash typed into the address bar as hashchange
  remember: (place) => { const key = placeKey(place); if (location.hash !== key) history.pushState(null, "", key); },
  // a panel that followed the view beside it corrects the place without a step of history of its own
  replace: (place) => { const key = placeKey(place); if (location.hash !== key) history.replaceState(null, "", key); },
  link: placeKey,
  keys: document,
});
// a link to a fragment fires both popstate and hashchange: route once
const onNavigate = () => { if (location.hash !== viewer.current()) viewer.route(parsePlace(location.hash)); };
window.addEventListener("hashchange", onNavigate);
window.addEventListener("popstate", onNavigate);
viewer.route(parsePlace(location.hash));

// Served from a trace file, the server follows it (triton_trace/view/reload.py): when a new run rewrote
// it, the page reloads at the same place (the URL keeps it). Nothing to poll for a trace given as an object.
const POLL_MS = 2000;
let seen = null;
async function poll() {
  const res = await fetchJson(apiUrl(ROUTES, "version")).catch(() => null);
  if (!res || res.error) { setTimeout(poll, POLL_MS); return; }      // the server is busy or restarting
  const v = res.body;
  if (!v.watching) return;
  if (seen === null) seen = v.version;
  else if (v.version !== seen) { location.reload(); return; }
  if (v.error) document.getElementById("status").textContent = v.error;
  setTimeout(poll, POLL_MS);
}
poll();
