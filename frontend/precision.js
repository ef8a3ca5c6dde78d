// The Source panel's precision column (the "precision" route, triton_trace/view/precisionview.py): for a
// launch followed by a float64 shadow, each line's error in ulps, its share of a stored tensor's error and how
// much it amplifies its operands' error; the line where precision is lost is marked. Without the shadow the
// column's header says how to get it. It decorates the lines SourceView drew (detail.js), so the column needs
// nothing of the source view but its line elements.
import { h } from "./dom.js";
import { fmtPct, fmtSig } from "./units.js";

const ulps = (v) => (v === null || v === undefined ? "-" : fmtSig(v));

// One sentence per number, the cell's hover text (lines joined by newlines).
function lineSentences(d, k) {
  const L = d.lines, type = L.type[k] || "its type";
  const out = [`max error ${ulps(L.error_max[k])} ulps of ${type} (mean ${ulps(L.error_mean[k])}): how far this line's `
               + "result is from the same computation in float64, everything before it included."];
  for (const s of L.shares[k]) {
    out.push(`${fmtPct(s.share)} of ${s.tensor}'s error (stored at line ${s.store_line}) is this line's own rounding: `
             + "the error left when only this line rounds and every other op is exact.");
  }
  out.push(`amplified ×${fmtSig(L.amplified_mean[k])} on average (up to ×${fmtSig(L.amplified_max[k])}): its result's `
           + "error over its operands' largest, about 1 to 2 where a line only rounds and far more where it cancels.");
  out.push(`its own rounding is at most ${ulps(L.local_max[k])} ulps (0.5 for a correctly rounded op).`);
  return out;
}

function storeSentences(d, j) {
  const S = d.stores;
  return [`${S.tensor[j]} stored here is up to ${ulps(S.error_max[j])} ulps of ${S.type[j]} from float64 (mean `
          + `${ulps(S.error_mean[j])}; ${ulps(S.normwise[j])} ulps of its largest value).`];
}

function lostSentence(x) {
  return `precision is lost here: of ${x.tensor}'s path (stored at line ${x.store_line}) this line multiplies the error `
         + `most, ×${fmtSig(x.amplified_mean)} on average (the precision_loss hint in Findings).`;
}

// The header's text and hover without values: why there are none.
function absent(res) {
  if (res.error) return ["precision: not available here", res.error];
  return ["precision: trace with shadow='float64' or serve with --shadow float64", res.body.note || ""];
}

// Draws into the #source element over the lines SourceView drew; a DOM builder, as SourceView is.
export class PrecisionColumn {
  constructor(box) { this.box = box; }

  // lines: SourceView.lines (line number -> its element); res: the route's answer, {body} or {error}.
  show(lines, res) { draw(this.box, lines, res); }
}

function draw(box, lines, res) {
  if (!lines.size || box.querySelector(".src-head")) return;       // no source, or this drawing has its column
  const d = res.body;
  box.classList.toggle("precision", Boolean(d && d.available));
  box.dataset.precision = d && d.available ? "shown" : "absent";
  if (!d || !d.available) {
    const [text, title] = absent(res);
    box.prepend(h("div", { class: "src-head" }, h("span", { class: "m" }), h("span", { class: "p wide", title }, text)));
    return;
  }
  const how = d.source === "rerun" ? `run again with the ${d.mode} shadow` : `recorded with the ${d.mode} shadow`;
  box.prepend(h("div", { class: "src-head" }, h("span", { class: "m" }),
    h("span", { class: "p", title: `${how}: per line its max error in ulps, its share of a stored tensor's error and how much it amplifies its operands' error; hover a line for each number` },
      "precision: ulps · % of error · ×amp"), h("span", { class: "n" }),
    h("span", { class: "t muted" }, d.other_files ? `${d.other_files} line(s) of other files not shown` : "")));
  const stored = new Map(d.stores.line.map((ln, j) => [ln, j]));
  const lost = new Map(d.lost.map((x) => [x.line, x]));
  const row = new Map(d.lines.line.map((ln, k) => [ln, k]));
  for (const [ln, el] of lines) {
    const k = row.get(ln), j = stored.get(ln), x = lost.get(ln);
    const cell = h("span", { class: "p" });
    const sentences = [];
    if (k !== undefined) {
      const share = d.lines.shares[k][0];
      cell.append(h("span", { class: "pe" }, ulps(d.lines.error_max[k])),
        h("span", { class: "ps" }, share ? `${fmtPct(share.share, 2)} ${share.tensor}` : ""),
        h("span", { class: "pa" }, `×${fmtSig(d.lines.amplified_mean[k], 2)}`));
      sentences.push(...lineSentences(d, k));
    } else if (j !== undefined) {
      cell.append(h("span", { class: "pe" }, ulps(d.stores.error_max[j])), h("span", { class: "ps" }, d.stores.tensor[j]));
    }
    if (j !== undefined) sentences.push(...storeSentences(d, j));
    if (x) { sentences.unshift(lostSentence(x)); el.classList.add("lost"); el.dataset.lost = x.tensor; }
    if (sentences.length) cell.title = sentences.join("\n");
    el.children[0].after(cell);
  }
}
