// The compared trace, launch by launch: the metrics that changed and the findings one side has and the
// other has not (triton_trace/view/compareview.py). Shown only when the server holds a second trace.
import { clear, fmtNum, h, pidText } from "./dom.js";
import { fmtMetric } from "./units.js";

export class CompareCard {
  constructor($, api) {
    this.$ = $;
    this.api = api;
    this.req = 0;
  }

  // on: the server has a compared trace with a launch ``li``; labels: metric key -> label
  async show(li, on, labels) {
    const card = this.$("compare-card"), mine = ++this.req;
    card.hidden = !on;
    delete card.dataset.ready;
    if (!on) return;
    const d = await this.api("compare", { i: li });
    if (mine !== this.req || !d) return;
    const M = d.metrics, body = clear(this.$("compare-body"));
    this.$("compare-note").textContent = d.error || `this launch against launch ${li} (${d.kernel}) of the compared trace`;
    const rows = M.key.map((k, j) => {
      // two values that differ never print alike ("1 kB" and "1 kB"): then both are written in full
      let a = fmtMetric(k, M.here[j]), b = fmtMetric(k, M.there[j]);
      if (a === b) { a = fmtNum(M.here[j]); b = fmtNum(M.there[j]); }
      return h("tr", { "data-metric": k }, h("td", {}, labels.get(k) || k), h("td", { class: "num" }, a), h("td", { class: "num" }, b));
    });
    body.append(h("div", {}, h("h3", {}, "Metrics that differ"), M.key.length
      ? h("table", { class: "table compact" }, h("thead", {}, h("tr", {}, h("th", {}, "metric"), h("th", { class: "num" }, "here"),
          h("th", { class: "num" }, "compared"))), h("tbody", {}, ...rows))
      : h("p", { class: "muted" }, "every metric is the same")));
    const list = (title, items, cls) => h("div", { class: cls }, h("h3", {}, `${title} (${items.length})`), items.length
      ? h("ul", {}, ...items.map((f) => h("li", { class: cls }, `${f.kind}${f.tensor ? ` on ${f.tensor}` : ""}` +
          `${f.program ? ` · program ${pidText(f.program)}` : ""}${f.line ? ` · line ${f.line}` : ""}`)))
      : h("p", { class: "muted" }, "none"));
    body.append(h("div", {}, list("Findings only here", d.only_here, "new"), list("Findings only in the compared trace", d.only_there, "gone")));
    card.dataset.ready = "1";
  }
}
