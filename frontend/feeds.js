// The loads that fed a clicked element (FeedsPayload, triton_trace/view/feeds.py): per write that decides its
// value, each load line with its trips and the elements it fed; a click outlines them on their tensor, over all
// programs (tensor.js draws the outline with the finding's and the pinned element's).
import { clear, fmtNum, h, pidText } from "./dom.js";

// "rows 5 · cols 0–63" for a feed's ranges (FeedsPayload): per dim its runs, named as the tensor view names them.
export function rangesText(ranges) {
  if (!ranges || !ranges.length) return "";
  const names = ranges.length === 1 ? [["element", "elements"]] : ranges.length === 2 ? [["row", "rows"], ["col", "cols"]]
    : ranges.map((_, d) => [`dim ${d} =`, `dim ${d}`]);
  return ranges.map((r, d) => {
    const one = r.count === 1 && r.runs[0][0] === r.runs[0][1];
    const runs = r.runs.map(([a, b]) => (a === b ? String(a) : `${a}–${b}`)).join(", ") + (r.count > r.runs.length ? ", …" : "");
    return `${names[d][one ? 0 : 1]} ${runs}`;
  }).join(" · ");
}

// The loads that fed the clicked element (FeedsPayload, view/feeds.py): per write that decides its value, each
// load line with its trips and the elements it fed; a click outlines them on their tensor (tensor.js).
export function showFeeds(v, data) {
  const box = v.$("tensor-feeds");
  v.feeds = data;
  if (v.onFeeds) v.onFeeds(data);
  clear(box);
  if (!data) { box.hidden = true; delete box.dataset.index; return; }
  box.hidden = false;
  box.dataset.index = data.index.join(",");
  const el = `${data.name}[${data.index.join(", ")}]`;
  if (!data.recorded) { box.append(h("div", { class: "muted" }, `${el}: this trace has no dataflow facts (recorded before triton_trace kept them).`)); return; }
  if (!data.writes.length) { box.append(h("div", { class: "muted" }, `${el}: no recorded write, so nothing fed it.`)); return; }
  data.writes.forEach((w, k) => {
    const mine = data.feeds.map((f, j) => [f, j]).filter(([f]) => f.write === k);
    box.append(h("div", { class: "muted" }, `${el} ${k === 0 && data.writes.length === 1 ? "was" : "is partly"} written by ${w.kind} at line ${w.line} ` +
      `(program ${pidText(w.program)}, op ${w.seq}, lane (${w.lane.join(", ")})) · fed by ${mine.length ? `${mine.length} load line(s); click one to outline its elements` : "no load (constants only)"}`));
    const list = h("ol", { class: "scroll" });
    for (const [f, j] of mine) {
      const what = f.how === "untraced" ? "every lane of its tiles (untraced: a divergent loop merged the values)"
        : `${rangesText(f.ranges)}${f.box ? "" : " (not every combination)"}`;
      const trips = `${f.trips} of ${f.of} ${f.of === 1 ? "execution" : "executions"}`;
      const label = `${f.op} ${f.name ?? "?"} · line ${f.line} · ${trips} · ${what} · ${fmtNum(f.elements)} element(s)` +
        (f.role === "address" ? " · via the pointers or mask" : "") + (f.truncated ? ` (the first ${f.indices.length} outlined)` : "") +
        (f.outside ? ` · ${fmtNum(f.outside)} outside the view` : "");
      list.append(h("li", { class: "r" }, h("button", { type: "button", class: "fc-step", "data-f": j, "aria-pressed": "false",
        disabled: f.tensor === null || !f.indices.length }, label)));
    }
    box.append(list);
  });
  if (data.writes_total > data.writes.length) box.append(h("div", { class: "muted" }, `… the first ${data.writes.length} of ${data.writes_total} writes`));
}

// Feed ``k`` of the listed ones: its tensor over all programs, the elements it fed outlined.
export async function showFed(v, k) {
  const f = v.feeds && v.feeds.feeds[k];
  if (!f || f.tensor === null) return;
  v.fed = { t: f.tensor, indices: f.indices, k };
  for (const b of v.$("tensor-feeds").querySelectorAll("button[data-f]")) b.setAttribute("aria-pressed", String(Number(b.dataset.f) === k));
  v.t = f.tensor;
  v.mode = "all";
  await v.refresh();
}
