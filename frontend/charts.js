// Charts drawn with plotly.js. The host page supplies it (``plotly()``: the app serves it from /vendor/,
// a notebook carries it once per page); it is asked for only once the rest of the view has painted: it is
// large, and the grid must paint first.
import { fmtBytes, fmtSeconds } from "./units.js";

// plotly reads a few HTML-like tags in its strings; names from the trace are shown literally instead
export const plotlyText = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"] };
const TITLE = { font: { size: 12 }, x: 0.01, xanchor: "left" };
const note = (text) => ({ text, showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5, font: { color: "#6b7280" } });
// Ticks of a log axis from lo to hi: each power of ten, labelled with an SI prefix from 1e-24 to 1e24. plotly's
// own "SI" labels stop at T and write 10<sup>15</sup> past it, a <tspan> with a style attribute, which the
// page's Content-Security-Policy (style-src 'self', app.py) blocks: an fp16 roofline reaches 1 PFLOP/s.
const PREFIX = ["y", "z", "a", "f", "p", "n", "μ", "m", "", "k", "M", "G", "T", "P", "E", "Z", "Y"];
export function logTicks(lo, hi) {
  const tickvals = [], ticktext = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    const g = Math.floor(e / 3), prefix = PREFIX[g + 8];
    tickvals.push(10 ** e);
    ticktext.push(prefix === undefined ? `1e${e}` : `${10 ** (e - 3 * g)}${prefix}`);
  }
  return { tickmode: "array", tickvals, ticktext };
}

const BASE = { margin: { l: 58, r: 12, t: 34, b: 46 }, font: { size: 11, family: "system-ui, sans-serif" },
               paper_bgcolor: "#fff", plot_bgcolor: "#fafafa" };

export class Charts {
  constructor($, api, plotly) { this.$ = $; this.api = api; this.plotly = plotly; this.data = null; this.metric = "load_bytes"; }

  async load(index, labels) {
    this.labels = labels;
    let Plotly, data;
    try {
      [Plotly, data] = await Promise.all([this.plotly(), this.api("charts", { i: index })]);
    } catch (e) {
      this.$("charts-note").textContent = `No charts: ${e.message}`;
      return;
    }
    if (!data) return;
    this.Plotly = Plotly;
    this.data = data;
    this.histogram();
    this.roofline();
    this.tensors();
    this.$("charts-panel").dataset.ready = "1";
  }

  setMetric(metric) { this.metric = metric; if (this.data) this.histogram(); }

  histogram() {
    const hd = this.data.histograms[this.metric];
    if (!hd) return;
    const mid = hd.counts.map((_, i) => (hd.edges[i] + hd.edges[i + 1]) / 2);
    const width = hd.edges[1] - hd.edges[0];
    this.Plotly.react(this.$("chart-hist"), [{ type: "bar", x: mid, y: hd.counts, width, marker: { color: "#2563eb" },
      hovertemplate: "%{x}: %{y} programs<extra></extra>" }],
    { ...BASE, title: { ...TITLE, text: `Programs by ${plotlyText(this.labels.get(this.metric) || this.metric)}` },
      xaxis: { title: { text: plotlyText(this.labels.get(this.metric) || this.metric) } }, yaxis: { title: { text: "programs" } }, bargap: 0.05 }, CONFIG);
  }

  roofline() {
    const r = this.data.roofline, el = this.$("chart-roofline");
    const ai = r.arithmetic_intensity, peak = r.peak_flops, bw = r.peak_bandwidth;
    const axis = (title) => ({ type: "log", title: { text: title }, exponentformat: "SI", dtick: 1 });
    const layout = { ...BASE, title: { ...TITLE, text: "Roofline" + (r.machine ? ` (${plotlyText(r.machine)})` : "") },
      xaxis: axis("arithmetic intensity (FLOP/byte)"), yaxis: axis("attainable FLOP/s"), showlegend: false };
    if (!peak || !bw) {
      this.Plotly.react(el, [], { ...layout, annotations: [note("no analysis: no GPU model to draw a roofline on")] }, CONFIG);
      return;
    }
    const ridge = peak / bw;
    const lo = Math.min(ai || ridge, ridge) / 100, hi = Math.max(ai || ridge, ridge) * 100;
    Object.assign(layout.xaxis, logTicks(lo, hi));
    Object.assign(layout.yaxis, logTicks(Math.min(peak, lo * bw), peak));
    const xs = [lo, ridge, hi];
    const traces = [{ x: xs, y: xs.map((x) => Math.min(peak, x * bw)), mode: "lines", line: { color: "#6b7280" }, hoverinfo: "skip" }];
    const annotations = [];
    if (ai) {
      traces.push({ x: [ai], y: [Math.min(peak, ai * bw)], mode: "markers+text", marker: { size: 11, color: "#dc2626" },
        text: [ai < ridge ? "memory bound" : "compute bound"], textposition: "bottom right",
        hovertemplate: "%{x:.3g} FLOP/byte<br>attainable %{y:.3s}FLOP/s<extra></extra>" });
    } else {
      annotations.push(note("no FLOPs recorded: pure data movement (memory bound)"));
    }
    if (r.time_s) annotations.push({ ...note(`time ≥ ${fmtSeconds(r.time_s)} on this GPU`), y: 0.02, yanchor: "bottom", x: 0.98, xanchor: "right" });
    this.Plotly.react(el, traces, { ...layout, annotations }, CONFIG);
  }

  tensors() {
    const t = this.data.tensors, names = t.name.map(plotlyText);
    this.Plotly.react(this.$("chart-tensors"), [
      { type: "bar", name: "loaded", x: names, y: t.load_bytes, marker: { color: "#2563eb" }, customdata: t.load_bytes.map(fmtBytes), hovertemplate: "%{x}: %{customdata} loaded<extra></extra>" },
      { type: "bar", name: "stored", x: names, y: t.store_bytes, marker: { color: "#ea580c" }, customdata: t.store_bytes.map(fmtBytes), hovertemplate: "%{x}: %{customdata} stored<extra></extra>" },
      ...(t.dram_read_bytes ? [{ type: "bar", name: "DRAM (L2 model)", x: names, y: t.dram_read_bytes.map((r, i) => r + t.dram_write_bytes[i]),
        marker: { color: "#6b7280" }, customdata: t.dram_read_bytes.map((r, i) => fmtBytes(r + t.dram_write_bytes[i])),
        hovertemplate: "%{x}: %{customdata} DRAM traffic (predicted)<extra></extra>" }] : [])],
    { ...BASE, barmode: "group", title: { ...TITLE, text: "Bytes per tensor" }, yaxis: { title: { text: "bytes" } },
      legend: { orientation: "h", x: 1, xanchor: "right", y: 1.02, yanchor: "bottom" } }, CONFIG);
  }
}
