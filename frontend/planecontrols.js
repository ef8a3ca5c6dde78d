// The tensor view's choices (tensor.js): which tensor and colouring, and which plane of it: the dims drawn as
// rows and columns, the index of every other dim, and for a tensor of rank 3 or more one plane or all of them
// side by side (small multiples, multiples.js), stepped through MAX_PANELS at a time.
import { clear, h } from "./dom.js";

// The tensor and colour selects of a launch (``v``: the TensorView).
export function tensorChoices(v, launch) {
  const sel = clear(v.$("tensor"));
  launch.tensors.name.forEach((n, i) => sel.append(h("option", { value: i }, `${n} ${launch.tensors.shape[i].join("×") || "scalar"}`)));
  const cs = clear(v.$("tensor-colour"));
  cs.append(h("option", { value: "auto" }, "by access"), h("option", { value: "program" }, "by program"),
    h("option", { value: "writers" }, "by writers (races)"), h("option", { value: "value" }, "by value"));
  if (launch.programs_in_flight) cs.append(h("option", { value: "wave" }, `by wave (${launch.programs_in_flight} programs at once)`));
  if (v.colour === "wave" && !launch.programs_in_flight) v.colour = "auto";
  if (v.compare) cs.append(h("option", { value: "diff" }, "by difference (compared trace)"));
  if (v.colour === "diff" && !v.compare) v.colour = "auto";
  cs.value = v.colour;
}

// The plane controls of the view drawn (v.data: a TensorPayload, or a PlanesPayload for small multiples).
export function planeControls(v) {
  const d = v.data, panels = d.panels, pl = panels ? (panels.length ? panels[0].plane : null) : d.plane;
  const rank = d.shape.length, box = clear(v.$("plane-controls"));
  const change = (values) => { Object.assign(v.plane(), values); v.refresh(); };
  if (!panels && v.mode !== "all" && (pl.windowed || pl.cell[0] * pl.cell[1] > 1)) {
    const z = h("button", { type: "button", class: "toggle", "aria-pressed": String(v.zoom), title: "draw only the selection's neighbourhood, element by element" }, "zoom to selection");
    z.addEventListener("click", () => { v.zoom = !v.zoom; v.refresh(); });
    box.append(z);
  }
  if (rank === 1) {
    const w = h("input", { type: "number", min: 1, max: d.shape[0], value: pl.wrap, title: "elements per row" });
    w.addEventListener("change", () => change({ wrap: Math.max(1, Number(w.value) || 1) }));
    box.append(h("label", {}, "row length", w));
    return;
  }
  if (rank < 2 || !pl) return;
  const dimSelect = (label, cur, dims, pick) => {
    const s = h("select", { "aria-label": label });
    for (const k of dims) s.append(h("option", { value: k }, `dim ${k} (${d.shape[k]})`));
    s.value = String(cur);
    s.addEventListener("change", () => pick(Number(s.value)));
    return s;
  };
  const all = [...Array(rank).keys()];
  // rows or columns moved onto the other one swap them; the dim the panels step along is chosen again
  const axis = (key, k) => {
    const other = key === "rows" ? pl.col_dim : pl.row_dim, values = { [key]: k, dim: undefined, first: 0 };
    if (k === other) values[key === "rows" ? "cols" : "rows"] = key === "rows" ? pl.row_dim : pl.col_dim;
    change(values);
  };
  box.append(h("label", {}, "rows", dimSelect("rows", pl.row_dim, all, (k) => axis("rows", k))),
    h("label", {}, "cols", dimSelect("cols", pl.col_dim, all, (k) => axis("cols", k))));
  if (rank >= 3) {
    const multi = h("button", { type: "button", id: "tensor-multi", class: "toggle", "aria-pressed": String(Boolean(panels)),
      title: "every plane along an outer dim, side by side (small multiples); click a panel to open it" }, "all planes");
    multi.addEventListener("click", () => change({ multi: !panels, index: pl.index, first: panels ? undefined : 0 }));
    box.append(multi);
  }
  const outer = panels ? d.dim : null;
  if (panels) {
    const free = all.filter((k) => k !== pl.row_dim && k !== pl.col_dim);
    if (free.length > 1) box.append(h("label", {}, "along", dimSelect("planes along", outer, free, (k) => change({ dim: k, first: 0 }))));
    if (d.total > panels.length || d.first > 0) box.append(stepper(d, (first) => change({ first })));
  }
  for (let k = 0; k < rank; k++) {
    if (k === pl.row_dim || k === pl.col_dim || k === outer) continue;
    const inp = h("input", { type: "number", min: 0, max: d.shape[k] - 1, value: pl.index[k], "aria-label": `index of dim ${k}` });
    inp.addEventListener("change", () => {
      const idx = pl.index.slice();
      idx[k] = Math.min(d.shape[k] - 1, Math.max(0, Number(inp.value) || 0));
      change({ index: idx });
    });
    box.append(h("label", {}, `dim ${k} =`, inp));
  }
}

// ‹ planes 0–31 of 100 ›: the panels drawn, and a step to the previous or next ones.
function stepper(d, go) {
  const n = d.panels.length, last = d.first + n - 1;
  const prev = h("button", { type: "button", class: "toggle", id: "planes-prev", title: "the previous planes", disabled: d.first === 0 }, "‹");
  const next = h("button", { type: "button", class: "toggle", id: "planes-next", title: "the next planes", disabled: last >= d.total - 1 }, "›");
  prev.addEventListener("click", () => go(Math.max(0, d.first - n)));
  next.addEventListener("click", () => go(last + 1));
  return h("span", { class: "steps" }, prev, h("span", { class: "step-text" }, `planes ${d.first}–${last} of ${d.total}`), next);
}
