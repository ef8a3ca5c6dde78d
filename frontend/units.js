// How numbers read: the twin of triton_trace/analysis/units.py, function for function, so the page, the
// notebook, the CLI and the report's hints print one number the same way (tests/analysis/test_units.py runs both).
// Decimal units (1 kB = 1000 B), three significant digits, no exponents; a before -> after pair gets more
// digits until a change shows. toFixed rounds the exact binary value, ties away from zero, as units.py does.

const DIGITS = 3;
const MAX_DIGITS = 9;
const BYTE_UNITS = ["B", "kB", "MB", "GB", "TB"];

function fixed(v, decimals) {
  let text = Math.abs(v) < 1e21 && decimals <= 100 ? v.toFixed(decimals) : exactFixed(v, decimals);
  if (text.includes(".")) text = text.replace(/0+$/, "").replace(/\.$/, "");
  return text === "-0" || text === "0" ? "0" : text;
}

// toFixed's rounding (the exact binary value, ties away from zero) where toFixed itself would not give digits:
// from 1e21 up it writes an exponent, past 100 decimals it throws. v = mantissa * 2**shift, exactly, in BigInt.
function exactFixed(v, decimals) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, v);
  const bits = view.getBigUint64(0), exp = Number((bits >> 52n) & 0x7ffn);
  const mantissa = (bits & ((1n << 52n) - 1n)) | (exp ? 1n << 52n : 0n);     // subnormals have no leading 1
  const shift = Math.max(exp, 1) - 1075;
  let n = mantissa * 10n ** BigInt(decimals);
  if (shift >= 0) n <<= BigInt(shift);
  else { const d = 1n << BigInt(-shift); n = (2n * n + d) / (2n * d); }    // half up, on the magnitude
  const digits = n.toString().padStart(decimals + 1, "0");
  return (bits >> 63n ? "-" : "") + (decimals ? `${digits.slice(0, -decimals)}.${digits.slice(-decimals)}` : digits);
}

// e with 10**(e-1) <= a < 10**e, by products and quotients (exact IEEE operations, unlike log10)
function intDigits(a) {
  if (a >= 1) {
    let e = 1, p = 10.0;
    while (a >= p) { e += 1; p *= 10; }
    return e;
  }
  let e = 0, p = 0.1;
  while (a < p) { e -= 1; p /= 10; }
  return e;
}

export function fmtSig(v, digits = DIGITS) {
  v = Number(v);
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
  if (v === 0) return "0";
  return fixed(v, Math.max(digits - intDigits(Math.abs(v)), 0));
}

export function fmtBytes(n, digits = DIGITS) {
  if (n === null || n === undefined) return "-";
  let v = Number(n), i = 0;
  while (Math.abs(v) >= 1000 && i < BYTE_UNITS.length - 1) { v /= 1000; i += 1; }
  let text = fmtSig(v, digits);
  if (Math.abs(Number(text)) >= 1000 && i < BYTE_UNITS.length - 1) {   // 999.96 kB rounds to the next unit
    v /= 1000; i += 1;
    text = fmtSig(v, digits);
  }
  return `${text} ${BYTE_UNITS[i]}`;
}

export function fmtPct(share, digits = DIGITS) {
  return share === null || share === undefined ? "-" : fmtSig(100 * Number(share), digits) + "%";
}

export function fmtSeconds(t, digits = DIGITS) {
  if (t === null || t === undefined) return "-";
  t = Number(t);
  const a = Math.abs(t);
  if (a < 1e-6) return fmtSig(t / 1e-9, digits) + " ns";
  if (a < 1e-3) return fmtSig(t / 1e-6, digits) + " us";
  if (a < 1) return fmtSig(t / 1e-3, digits) + " ms";
  return fmtSig(t, digits) + " s";
}

export function fmtChange(before, after, fmt = fmtBytes) {
  let digits = DIGITS, a = fmt(before, digits), b = fmt(after, digits);
  while (a === b && before !== after && digits < MAX_DIGITS) {
    digits += 1;
    a = fmt(before, digits); b = fmt(after, digits);
  }
  return `${a} -> ${b}`;
}

export function fmtMetric(key, v) {
  if (v === null || v === undefined) return "-";
  if (key.endsWith("_bytes")) return fmtBytes(v);
  if (key.endsWith("_share") || key.endsWith("_efficiency")) return fmtPct(v);
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  return fmtSig(v);
}

// A source location as IPython names it: a notebook cell is "cell In[8], line 6", a file "name.py:6".
export function place(file, line) {
  const name = String(file || "");
  if (/^cell In\[\d*\]$/.test(name)) return line ? `${name}, line ${line}` : name;
  const base = name.split(/[\\/]/).pop();
  return line ? `${base}:${line}` : base;
}
