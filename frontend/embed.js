// A notebook output's entry: the same viewer as the browser page, fed by payloads the output carries
// (triton_trace/view/embed.py puts them in a <script type="application/json"> beside the root). There is
// no server and no URL to keep a place in: navigation stays inside the output, and a view the output does
// not carry says so. plotly.js is the page's (a notebook carries it once, in its first triton_trace output).
import { placeKey } from "./places.js";
import { mount } from "./view.js";

let active = null;        // the output the pointer went down in last: arrow keys go to it, and to no other

// One stored answer: base64 of zlib-compressed JSON (embed.py's pack).
export async function unpack(packed) {
  if (!window.DecompressionStream) throw new Error("this browser cannot inflate the output's data (no DecompressionStream)");
  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return JSON.parse(await new Response(stream).text());
}

// data: {payloads: {URL: packed answer}, routes: the route table the viewer builds those URLs from
// (routes.py), start: place, note: what was left out and how to see it}
export function embed(root, data) {
  const packed = new Map(Object.entries(data.payloads)), answers = new Map();
  const missing = (path) => `This view is not in the notebook output (${data.note}). Asked for: ${path}.`;
  function request(path) {
    if (!packed.has(path)) return Promise.resolve({ error: missing(path) });
    if (!answers.has(path)) answers.set(path, unpack(packed.get(path)).then((body) => ({ body }), (e) => ({ error: e.message })));
    return answers.get(path);
  }
  const viewer = mount(root, {
    request,
    routes: data.routes,
    plotly: () => window.Plotly ? Promise.resolve(window.Plotly)
      : Promise.reject(new Error("plotly.js is not on this page (the first triton_trace output of a notebook carries it; display one again)")),
    remember: () => {},
    link: () => null,
    keys: { addEventListener: (type, fn) => document.addEventListener(type, (e) => { if (active === root) fn(e); }) },
  });
  root.addEventListener("pointerdown", () => { active = root; }, true);
  root.dataset.start = placeKey(data.start);
  viewer.route(data.start);
  return viewer;
}
