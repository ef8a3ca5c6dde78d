"""GPU bits for hand-picked inputs (cases.json) and for the fidelity benchmark's own inputs (all cases)."""
import json, os, sys, time, zlib
import numpy as np
import torch
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks/fidelity"))
import inline_asm as b

OUT = os.environ["OUT"]
WHAT, PART, PARTS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
k1, k2, k3 = b._kernels()
TORCH = {np.uint32: torch.int32, np.uint16: torch.int16, np.uint64: torch.int64, np.uint8: torch.int8}


def gpu(asm, cons, xs, out_kind, pack=1):
    n = xs[0].size
    dev = [torch.from_numpy(x.view(x.dtype.str.replace("u", "i"))).cuda() for x in xs]
    o = torch.zeros(n, dtype=TORCH[b._NP[out_kind]], device="cuda")
    {1: k1, 2: k2, 3: k3}[len(xs)][(n // 1024,)](*dev, o, ASM=asm, CONS=cons, PACK=pack, B=1024)
    torch.cuda.synchronize()
    return o.cpu().numpy().view(b._NP[out_kind])


t0 = time.time()
res = {}
for name, asm, cons, kinds, out, ins in json.load(open("benchmarks/fidelity/ptx_probe/cases.json"))[PART::PARTS] if WHAT == "probe" else []:
    n = max(len(v) for v in ins)
    xs = [np.resize(np.array(v, dtype=np.uint64), 1024).astype(b._NP[k]) for v, k in zip(ins, kinds)]
    try:
        g = gpu(asm, cons, xs, out)
        res[name] = {"asm": asm, "inputs": [[hex(int(v)) for v in x[:n]] for x in xs], "gpu": [hex(int(v)) for v in g[:n]]}
    except Exception as e:
        res[name] = {"asm": asm, "error": str(e).strip().splitlines()[-1][:300]}
    json.dump(res, open(f"{OUT}/probe{PART}.json", "w"), indent=0)
print("probe", len(res), time.time() - t0, flush=True)
names = list(b.CASES)
arrays = {}
for i, name in enumerate(names):
    if WHAT != "bench" or i % PARTS != PART:
        continue
    asm, cons, kinds, out_kind, pack = b.CASES[name]
    rs = np.random.RandomState(zlib.crc32(name.encode()))
    xs = [b.inputs(k, 65536, rs) for k in kinds]
    try:
        arrays[f"c{i}"] = gpu(asm, cons, xs, out_kind, pack)
    except Exception as e:
        print(name, e)
    np.savez_compressed(f"{OUT}/bench{PART}.npz", names=np.array(names), **arrays)
print("bench", len(arrays), time.time() - t0)
