"""Compare the emulation with GPU bits: the fidelity JSON's examples, probe*.json and bench*.npz (if present)."""
import glob, json, os, sys, zlib
import numpy as np
sys.path.insert(0, "benchmarks/fidelity")
import inline_asm as b
D = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/fidelity/ptx_probe/out"
NPK = {"i32": np.uint32, "i16": np.uint16, "i64": np.uint64}
def emu(asm, cons, xs, out, pack=1):
    return b.emulate(asm, cons, xs, out, pack)
ex = json.load(open("benchmarks/fidelity/gpu_2026-12-07b/inline_asm/inline_asm.json"))
bad = 0
for row in ex["rows"]:
    if row.get("status") == "approximate" or not row.get("examples"):
        continue
    asm, cons, kinds, out, pack = b.CASES[row["case"]]
    for e in row["examples"]:
        xs = [np.array([int(v, 16)], dtype=b._NP[k]) for v, k in zip(e["inputs"], kinds)]
        got = emu(asm, cons, xs, out, pack)
        if int(got[0]) != int(e["gpu"], 16):
            bad += 1
            print("EX", row["case"], e["inputs"], "gpu", e["gpu"], "emu", hex(int(got[0])))
print("examples mismatching:", bad)
for f in sorted(glob.glob(f"{D}/probe*.json")):
    for name, r in json.load(open(f)).items():
        if "error" in r:
            print("PROBE-ERR", name, r["error"][:120]); continue
        cases = {c[0]: c for c in json.load(open("benchmarks/fidelity/ptx_probe/cases.json"))}
        _, asm, cons, kinds, out, _ = cases[name]
        xs = [np.array([int(v, 16) for v in col], dtype=np.uint64).astype(NPK[k]) for col, k in zip(r["inputs"], kinds)]
        try:
            got = emu(asm, cons, xs, out)
        except Exception as e:
            print("PROBE-EMU-ERR", name, e); continue
        for i, g in enumerate(r["gpu"]):
            if int(got[i]) != int(g, 16):
                print("PROBE", name, [x[i] for x in r["inputs"]], "gpu", g, "emu", hex(int(got[i])))
for f in sorted(glob.glob(f"{D}/bench*.npz")):
    z = np.load(f)
    names = list(z["names"])
    for k in z.files:
        if k == "names": continue
        name = names[int(k[1:])]
        asm, cons, kinds, out, pack = b.CASES[name]
        if "approx" in asm or "div.full" in asm: continue
        rs = np.random.RandomState(zlib.crc32(name.encode()))
        xs = [b.inputs(kk, 65536, rs) for kk in kinds]
        got = emu(asm, cons, xs, out, pack)
        gpu = z[k]
        d = np.flatnonzero(gpu != got)
        print("BENCH", name, "mismatches", d.size, *[([hex(int(x[i])) for x in xs], hex(int(gpu[i])), hex(int(got[i]))) for i in d[:3]])
