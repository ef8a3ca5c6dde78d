// Small DOM, formatting and colour helpers. Data from the trace only ever reaches the page as text
// (textContent / setAttribute of non-executable attributes); nothing here parses HTML.

// Elements are looked up inside one app root, so several views (notebook outputs) can share a page.
export function scoped(root) {
  const found = new Map();
  return (id) => found.get(id) || found.set(id, root.querySelector("#" + id)).get(id);
}

// h("td", {class: "num", title: t}, "text", child...) builds an element; strings become text nodes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) throw new Error("event handlers are attached with addEventListener");
    el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) { el.replaceChildren(); return el; }

export function fmtNum(x) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return x.toLocaleString("en-US");
  const a = Math.abs(x);
  return a !== 0 && (a < 1e-3 || a >= 1e6) ? x.toExponential(3) : String(Number(x.toPrecision(5)));
}

// viridis, sampled at 9 stops; t in [0, 1], anything else clamped
const VIRIDIS = [[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
                 [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]];
const REDS = [[254, 242, 242], [254, 202, 202], [252, 165, 165], [248, 113, 113], [239, 68, 68], [185, 28, 28], [127, 29, 29]];
function ramp(stops, t) {
  t = t > 0 ? Math.min(1, t) : 0;      // clamped; NaN (0 / 0 of a flat range) is the low end, not a crash
  const x = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
  const a = stops[i], b = stops[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}
export function colormap(metric) { return metric === "findings" || metric === "oob_lanes" ? REDS : VIRIDIS; }    // "value": viridis
export function rampColor(metric, t) { return ramp(colormap(metric), t); }
export function rgb(c) { return `rgb(${c[0]},${c[1]},${c[2]})`; }
export function gradientCss(metric) {
  const stops = colormap(metric);
  return "linear-gradient(90deg," + stops.map((c, i) => `${rgb(c)} ${(100 * i / (stops.length - 1)).toFixed(0)}%`).join(",") + ")";
}

// A categorical colour per program id: golden-angle hues, so neighbouring programs differ.
export function programColor(lin) {
  const hue = (lin * 137.508) % 360;
  const light = 48 + (lin % 3) * 8;
  return hslToRgb(hue / 360, 0.62, light / 100);
}
function hslToRgb(hh, s, l) {
  const q = l < 0.5 ? l * (1 + s) : l + s - l * s, p = 2 * l - q;
  const f = (t) => {
    t = (t + 1) % 1;
    if (t < 1 / 6) return p + (q - p) * 6 * t;
    if (t < 1 / 2) return q;
    if (t < 2 / 3) return p + (q - p) * (2 / 3 - t) * 6;
    return p;
  };
  return [f(hh + 1 / 3), f(hh), f(hh - 1 / 3)].map((v) => Math.round(v * 255));
}

// Canvas sized in CSS pixels, drawn at device resolution.
export function sizeCanvas(canvas, w, h) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(w * dpr));
  canvas.height = Math.max(1, Math.round(h * dpr));
  canvas.style.width = w + "px";
  canvas.style.height = h + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

export function pidText(p) { return "(" + p.join(", ") + ")"; }

// Scroll an element of a scrolling panel into view, in the next frame: reading its position right after
// the DOM changed would force a synchronous layout in the middle of a click.
export function scrollIntoBox(el) {
  requestAnimationFrame(() => {
    const box = el.closest(".scroll");
    if (!box) return;
    const top = el.offsetTop - box.offsetTop, bottom = top + el.offsetHeight;
    if (top < box.scrollTop + 20 || bottom > box.scrollTop + box.clientHeight) box.scrollTop = top - box.clientHeight / 3;
  });
}

// A foldable panel's open state: the panel's data-state, its toggle button's text and aria-pressed
// (``<prefix>-panel`` and ``<prefix>-open``), scrolled into view when ``reveal``.
export function setPanelOpen($, prefix, open, reveal = false) {
  $(`${prefix}-panel`).dataset.state = open ? "open" : "closed";
  $(`${prefix}-open`).textContent = open ? "Hide" : "Show";
  $(`${prefix}-open`).setAttribute("aria-pressed", String(open));
  if (open && reveal) requestAnimationFrame(() => $(`${prefix}-panel`).scrollIntoView({ block: "nearest", behavior: "instant" }));
}
