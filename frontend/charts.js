// Charts drawn with plotly.js, which is served by the app itself (/vendor/plotly.min.js) and loaded
// only once the rest of the page has painted: it is large, and the grid must paint first.
import { $, fmtBytes } from "./dom.js";

let plotlyReady = null;
function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyReady) {
    plotlyReady = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = "/vendor/plotly.min.js";
      s.addEventListener("load", () => resolve(window.Plotly));
      s.addEventListener("error", () => reject(new Error("could not load /vendor/plotly.min.js")));
      document.head.append(s);
    });
  }
  return plotlyReady;
}

// plotly reads a few HTML-like tags in its strings; names from the trace are shown literally instead
const plotlyText = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"] };
const BASE = { margin: { l: 58, r: 12, t: 34, b: 46 }, font: { size: 11, family: "system-ui, sans-serif" },
               paper_bgcolor: "#fff", plot_bgcolor: "#fafafa" };

export class Charts {
  constructor(api) { this.api = api; this.data = null; this.metric = "load_bytes"; }

  async load(index, labels) {
    this.labels = labels;
    const [Plotly, data] = await Promise.all([loadPlotly(), this.api(`/api/launch/${index}/charts`)]);
    if (!data) return;
    this.Plotly = Plotly;
    this.data = data;
    this.histogram();
    this.roofline();
    this.tensors();
    $("charts-panel").dataset.ready = "1";
  }

  setMetric(metric) { this.metric = metric; if (this.data) this.histogram(); }

  histogram() {
    const hd = this.data.histograms[this.metric];
    if (!hd) return;
    const mid = hd.counts.map((_, i) => (hd.edges[i] + hd.edges[i + 1]) / 2);
    const width = hd.edges[1] - hd.edges[0];
    this.Plotly.react($("chart-hist"), [{ type: "bar", x: mid, y: hd.counts, width, marker: { color: "#2563eb" },
      hovertemplate: "%{x}: %{y} programs<extra></extra>" }],
    { ...BASE, title: { text: `Programs by ${plotlyText(this.labels[this.metric] || this.metric)}`, font: { size: 12 } },
      xaxis: { title: { text: plotlyText(this.labels[this.metric] || this.metric) } }, yaxis: { title: { text: "programs" } }, bargap: 0.05 }, CONFIG);
  }

  roofline() {
    const r = this.data.roofline, el = $("chart-roofline");
    const ai = r.arithmetic_intensity, peak = r.peak_flops, bw = r.peak_bandwidth;
    const layout = { ...BASE, title: { text: "Roofline" + (r.machine ? ` (${plotlyText(r.machine)})` : ""), font: { size: 12 } },
      xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" } },
      yaxis: { type: "log", title: { text: "attainable FLOP/s" } }, showlegend: false };
    if (!ai || !peak || !bw) {
      this.Plotly.react(el, [], { ...layout, annotations: [{ text: ai ? `arithmetic intensity ${ai.toPrecision(3)} FLOP/byte` : "no FLOPs or DRAM traffic to place on a roofline",
        showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }, CONFIG);
      return;
    }
    const ridge = peak / bw;
    const xs = [Math.min(ai, ridge) / 100, ridge, Math.max(ai, ridge) * 100];
    const roof = xs.map((x) => Math.min(peak, x * bw));
    const at = Math.min(peak, ai * bw);
    this.Plotly.react(el, [
      { x: xs, y: roof, mode: "lines", line: { color: "#6b7280" }, hoverinfo: "skip" },
      { x: [ai], y: [at], mode: "markers+text", marker: { size: 11, color: "#dc2626" }, text: [ai < ridge ? "memory bound" : "compute bound"],
        textposition: "bottom right", hovertemplate: "AI %{x:.3g} FLOP/B<br>attainable %{y:.3g} FLOP/s<extra></extra>" }], layout, CONFIG);
  }

  tensors() {
    const t = this.data.tensors, names = t.name.map(plotlyText);
    this.Plotly.react($("chart-tensors"), [
      { type: "bar", name: "loaded", x: names, y: t.load_bytes, marker: { color: "#2563eb" }, customdata: t.load_bytes.map(fmtBytes), hovertemplate: "%{x}: %{customdata} loaded<extra></extra>" },
      { type: "bar", name: "stored", x: names, y: t.store_bytes, marker: { color: "#ea580c" }, customdata: t.store_bytes.map(fmtBytes), hovertemplate: "%{x}: %{customdata} stored<extra></extra>" }],
    { ...BASE, barmode: "group", title: { text: "Bytes per tensor", font: { size: 12 } }, yaxis: { title: { text: "bytes" } },
      legend: { orientation: "h", y: 1.12, x: 1, xanchor: "right" } }, CONFIG);
  }
}
