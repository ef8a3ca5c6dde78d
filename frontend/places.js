// A place in the viewer and its URL hash, and the part of it the Storage and Tiles panels keep: a panel the URL
// names opens on the tensor, mode and trip it names (view.js routes places; app.js keeps them in the URL).
import { compiledKey, parseCompiled } from "./compiled.js";

// A place in the viewer: {view: "list"} or {view: "launch", li, pid: [x, y, z] | null, op: seq | null,
// el: {t, index} (an element of tensor t whose accesses are listed) | null, storage: {t, mode} (the Storage
// panel open beside tensor t's view in mode "all", "program" or "op") | null, tiles: {step: a trip, or null
// for all of them} (the Tiles panel open on the program) | null, compiled: the Compiled panel's place
// (compiled.js) | null}.
export function placeKey(p) {
  if (p.view !== "launch") return "#/";
  let key = `#/launch/${p.li}`;
  if (p.pid) key += `/program/${p.pid.join(",")}`;
  if (p.pid && p.op !== null && p.op !== undefined) key += `/op/${p.op}`;
  if (p.el) key += `/element/${p.el.t}:${p.el.index.join(",")}`;
  if (p.storage) key += `/storage/${p.storage.t}:${p.storage.mode}`;
  if (p.tiles && p.pid) key += `/tiles/${p.tiles.step ?? "all"}`;
  return key + compiledKey(p.compiled);
}

const PLACE = new RegExp("^#/launch/(?<li>\\d+)(?:/program/(?<pid>\\d+(?:,\\d+){0,2}))?(?:/op/(?<op>\\d+))?" +
  "(?:/element/(?<t>\\d+):(?<index>\\d+(?:,\\d+)*|))?(?:/storage/(?<st>\\d+):(?<mode>all|program|op))?" +
  "(?:/tiles/(?<step>\\d+|all))?(?<compiled>/compiled[\\w/:]*?)?/?$");

export function parsePlace(text) {
  const m = String(text).match(PLACE), g = m ? m.groups : null;
  const compiled = m ? parseCompiled(g.compiled) : undefined;
  if (compiled === undefined) return { view: "list" };
  const pid = g.pid ? g.pid.split(",").map(Number) : null;
  while (pid && pid.length < 3) pid.push(0);
  const el = g.t !== undefined ? { t: Number(g.t), index: g.index ? g.index.split(",").map(Number) : [] } : null;
  const storage = g.st !== undefined ? { t: Number(g.st), mode: g.mode } : null;
  const tiles = g.step !== undefined && pid ? { step: g.step === "all" ? null : Number(g.step) } : null;
  return { view: "launch", li: Number(g.li), pid, op: g.op !== undefined ? Number(g.op) : null, el, storage, tiles, compiled };
}

// The Storage and Tiles panels' part of the place. panels: {storage, tiles, tensor} (storage.js, tiles.js,
// tensor.js); S: the viewer's state (view.js: li, pid, op, compiled, place, routing); host: the viewer's host.
export class PanelPlaces {
  constructor(S, panels, host) {
    this.S = S;
    this.p = panels;
    this.host = host;
  }

  // The panels' part of a place, as they are now.
  part() {
    const { storage, tiles } = this.p;
    return { storage: storage.open && storage.sel ? { t: storage.sel.t, mode: storage.sel.mode } : null,
             tiles: tiles.open && this.S.pid ? { step: tiles.step } : null };
  }

  // A panel was opened, closed or stepped, or followed the view beside it: the URL names the open panels, so
  // opening it reopens the same panels, tensor, program and trip. It is corrected in place: panels are no
  // steps of Back / Forward, and a place that does not name a panel leaves it as it is.
  moved() {
    const S = this.S;
    if (S.li === null || !S.launch || S.routing) return;
    const place = { view: "launch", li: S.li, pid: S.pid, op: S.pid ? S.op : null, el: this.p.tensor.pinned,
                    compiled: S.compiled, ...this.part() };
    const key = placeKey(place);
    if (key === S.place) return;
    S.place = key;
    (this.host.replace || this.host.remember)(place);
  }

  // The panels a place names, open on the tensor, mode and trip it says.
  async show(r) {
    const { storage, tiles, tensor } = this.p;
    if (r.storage) {
      await tensor.want(r.storage.t, r.storage.mode);
      if (!storage.open) await storage.show(true);
    }
    if (r.tiles && r.pid && (!tiles.open || tiles.step !== r.tiles.step)) {
      tiles.step = r.tiles.step;
      await tiles.show(!r.storage);
    }
  }
}
