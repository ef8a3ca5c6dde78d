// Request URLs from the server's route table (triton_trace/view/routes.py), which reaches the page as JSON:
// the browser page's <body data-tt-routes>, a notebook output's data.routes. Python's routes.url() builds the
// same string for the same request, which is how a notebook output finds the answers it carries.

// routes: {name: {path: "/api/launch/{i}/grid", query: ["z"]}}; values: {i: 0, z: 1, program: [2, 1, 0]}.
// Path values are required; a query value that is null or undefined is left out; an array is joined with
// commas; the query keeps the table's order and URLSearchParams' encoding.
export function apiUrl(routes, name, values = {}) {
  const route = routes[name];
  if (!route) throw new Error(`no API route named ${name}`);
  const text = (v) => (Array.isArray(v) ? v.join(",") : String(v));
  const absent = (v) => v === null || v === undefined;
  const path = route.path.replace(/\{(\w+)\}/g, (_, k) => {
    if (absent(values[k])) throw new Error(`the ${name} route needs ${k}`);
    return text(values[k]);
  });
  for (const k of Object.keys(values)) {
    if (!route.query.includes(k) && !route.path.includes(`{${k}}`)) throw new Error(`the ${name} route takes no ${k}`);
  }
  const query = new URLSearchParams();
  for (const k of route.query) if (!absent(values[k])) query.set(k, text(values[k]));
  const q = query.toString();
  return q ? `${path}?${q}` : path;
}

// The table the server put on the page, or an error naming what is missing.
export function pageRoutes(body) {
  const text = body.dataset.ttRoutes;
  if (!text) throw new Error("this page has no route table (data-tt-routes): open it from triton_trace.launch()");
  return JSON.parse(text);
}
