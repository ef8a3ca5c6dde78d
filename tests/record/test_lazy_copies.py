"""CPU storages are copied into the launch's padded buffers only where that is needed (record/memory/space.py):
a traced launch reads and writes the caller's bytes in place, unless an access needs raw addresses or the
launch keeps its inputs (then a storage is copied when first written). What a kernel computes, what the
trace records and what the caller's tensors hold afterwards must not depend on where the bytes are."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.record.memory.space import HostMemory
from helpers.batch import assert_same_traces, run_both


def test_an_input_is_read_in_place_until_written():
    mem = HostMemory()
    x = torch.arange(1000, dtype=torch.float32)
    host = mem.host_tensor("x", x)
    st = mem.storages[0]
    assert not st.copied
    view = mem.typed_view(0, np.float32)
    assert np.shares_memory(view, x.numpy()) and not view.flags.writeable
    np.testing.assert_array_equal(view, x.numpy())
    mem.mark_written(0)                      # the first store: the bytes move into the padded buffer
    assert st.copied and st.written
    view = mem.typed_view(0, np.float32)
    assert view.flags.writeable and not np.shares_memory(view, x.numpy())
    np.testing.assert_array_equal(view, x.numpy())
    assert view.ctypes.data == host.data_ptr()            # the addresses the kernel holds
    view[:] = -1
    assert torch.equal(x, torch.arange(1000, dtype=torch.float32))     # the caller's copy, until copy_back
    mem.copy_back()
    assert torch.equal(x, torch.full((1000,), -1.0))


def test_in_place_writes_go_to_the_callers_storage_until_raw_accesses_need_the_buffer():
    mem = HostMemory(in_place=True)
    x = torch.arange(1000, dtype=torch.float32)
    host = mem.host_tensor("x", x)
    st = mem.storages[0]
    mem.mark_written(0)
    assert st.written and not st.copied                # no copy: the caller's bytes are written where they are
    view = mem.typed_view(0, np.float32)
    assert view.flags.writeable and np.shares_memory(view, x.numpy())
    view[:10] = -1
    assert torch.equal(x[:10], torch.full((10,), -1.0))
    mem.copy_back()                                    # nothing to copy back
    assert torch.equal(x[10:], torch.arange(10, 1000, dtype=torch.float32))
    mem.copy_all()                                     # the interpreter's own C++ accesses use the addresses
    assert st.copied
    view = mem.typed_view(0, np.float32)
    assert view.ctypes.data == host.data_ptr() and not np.shares_memory(view, x.numpy())
    np.testing.assert_array_equal(view[:12], [-1.0] * 10 + [10.0, 11.0])
    view[10] = 99
    assert float(x[10]) == 10.0
    mem.copy_back()                                    # now written in the buffer: copied back
    assert float(x[10]) == 99.0 and float(x[0]) == -1.0


def test_a_traced_launch_copies_no_cpu_storage_unless_inputs_are_kept(monkeypatch):
    """The vector add writes its output in place (no copy of either input or the output); with
    trace(inputs=True) a storage is copied when first written, so the kept inputs are the caller's bytes
    before the launch (a kernel that updates its argument in place)."""
    from triton_trace.record.memory import space as memory_mod
    from kernels import tutorials as K
    copies = []
    real = memory_mod._copy
    monkeypatch.setattr(memory_mod, "_copy", lambda dst, src: (copies.append(dst.numel()), real(dst, src)))
    x, y = torch.randn(3000), torch.randn(3000)
    out = K.add(x, y, kernel=trace(K.make_add()), block=256)
    assert torch.equal(out, x + y) and copies == []
    x0 = torch.randn(8 * 32)
    x = x0.clone()
    trace(_shift_in_place, inputs=True)[(8,)](x, x.numel(), BLOCK=32)
    assert copies == [4 * 256, 4 * 256]                # copied in when first written, and back
    assert torch.equal(x[:32], x0[32:64] * 2 + 1)
    lc = triton_trace.current_trace().launches[-1]
    np.testing.assert_array_equal(lc.inputs[:4 * 256].view(np.float32), x0.numpy())
    np.testing.assert_array_equal(lc.finals.view(np.float32), x.numpy())


def test_copy_all_moves_every_storage_for_raw_accesses():
    mem = HostMemory()
    a, b = torch.randn(300), torch.randint(0, 9, (77,), dtype=torch.int16)
    mem.host_tensor("a", a)
    mem.host_tensor("b", b)
    mem.copy_all()
    assert all(st.copied and not st.written for st in mem.storages)
    for i, t in enumerate((a, b)):
        np.testing.assert_array_equal(mem.typed_view(i, t.numpy().dtype), t.numpy())


@triton.jit
def _shift_in_place(x_ptr, n, BLOCK: tl.constexpr):
    # program p reads block p + 1 and writes block p: a program that runs later reads what an earlier one
    # left, in launch order (the chunk check re-runs a chunk whose programs depend on each other)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs + BLOCK, mask=offs + BLOCK < n, other=0.)
    tl.store(x_ptr + offs, v * 2 + 1, mask=offs < n)


def test_a_kernel_that_reads_what_it_later_writes_matches_launch_order():
    x0 = torch.randn(8 * 32)
    want = x0.clone()
    for p in range(8):                      # one program at a time, in order, independently of the tool
        nxt = want[(p + 1) * 32:(p + 2) * 32] if p < 7 else torch.zeros(32)
        want[p * 32:(p + 1) * 32] = nxt * 2 + 1
    (o1, t1), (o2, t2) = run_both(lambda o: (lambda x: (trace(_shift_in_place, **o)[(8,)](x, x.numel(), BLOCK=32), x)[1])(
        x0.clone()), 8)
    torch.testing.assert_close(o1, want)
    assert torch.equal(o1, o2)
    assert_same_traces(t1, t2)


@triton.jit
def _half_store_and_count(x_ptr, out_ptr, count_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, v + 1, mask=(offs < n) & (offs % 2 == 0))       # odd elements keep their bytes
    tl.atomic_add(count_ptr, tl.sum((v > 0).to(tl.int32), axis=0))


@pytest.mark.parametrize("batch", [False, True])
def test_unwritten_elements_keep_their_values_and_atomics_see_the_inputs(batch):
    x = torch.randn(1000)
    out = torch.full((1000,), 7.0)
    count = torch.zeros(1, dtype=torch.int32)
    x_before = x.clone()
    trace(_half_store_and_count, batch=batch)[(triton.cdiv(1000, 128),)](x, out, count, 1000, BLOCK=128)
    want = torch.full((1000,), 7.0)
    want[0::2] = x[0::2] + 1
    assert torch.equal(out, want) and torch.equal(x, x_before)
    assert int(count) == int((x > 0).sum())


@triton.jit
def _unaligned_words(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # int32 words read one byte past an aligned address: the interpreter's own per-lane loads serve them
    i = tl.arange(0, BLOCK)
    p = (x_ptr.to(tl.pointer_type(tl.int8)) + 1 + 4 * i).to(tl.pointer_type(tl.int32))
    tl.store(out_ptr + i, tl.load(p))


def test_unaligned_loads_of_an_unwritten_input_read_its_bytes():
    raw = torch.randint(-128, 127, (4 * 64 + 8,), dtype=torch.int8)
    out = torch.zeros(64, dtype=torch.int32)
    trace(_unaligned_words)[(1,)](raw, out, BLOCK=64)
    want = np.frombuffer(raw.numpy().tobytes()[1:1 + 4 * 64], dtype=np.int32)
    np.testing.assert_array_equal(out.numpy(), want)
    lc = triton_trace.current_trace().launches[-1]
    assert lc.completed


# ---------------------------------------------------------------------------------------------------------
# a batched chunk's contiguous loads of storages no op wrote yet are views, not copies (proxy.load,
# memory.may_view); a write to such a storage in the same chunk sends the chunk back to copy them
# ---------------------------------------------------------------------------------------------------------
def _spy_views(monkeypatch):
    """Count the loads handed out as views of a storage, by tensor name."""
    from triton_trace.record.memory import space as M
    seen = []
    real = M.HostMemory.note_view

    def note(self, tensor):
        seen.append(self.tensors[tensor].name)
        return real(self, tensor)
    monkeypatch.setattr(M.HostMemory, "note_view", note)
    return seen


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, a * x + y)


def test_contiguous_loads_of_unwritten_inputs_are_views_and_give_the_same_bits(monkeypatch):
    seen = _spy_views(monkeypatch)
    x, y = torch.randn(64 * 256), torch.randn(64 * 256)
    x0, y0 = x.clone(), y.clone()

    def run(opts):
        out = torch.empty_like(x)
        trace(**opts)(_axpy)[(64,)](x, y, out, x.numel(), 1.5, BLOCK=256)
        return out
    (o1, t1), (o2, t2) = run_both(run, 64)
    assert sorted(set(seen)) == ["x_ptr", "y_ptr"]            # the batched run read both without copying
    assert torch.equal(o1, o2) and torch.equal(o2, 1.5 * x0 + y0)
    assert torch.equal(x, x0) and torch.equal(y, y0)          # (views are read-only: nothing wrote through one)
    assert_same_traces(t1, t2)
    assert t2.launches[0].meta["execution"]["fallbacks"] == []


@triton.jit
def _update_then_copy(x_ptr, keep_ptr, BLOCK: tl.constexpr):
    # reads x, overwrites it, then stores what it read: the value held must be the one loaded
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x * 2 + 1)
    tl.store(keep_ptr + offs, x)


def test_a_chunk_that_writes_what_it_read_as_views_runs_again_with_copies(monkeypatch):
    from triton_trace.record import executor
    seen = _spy_views(monkeypatch)
    retries = []
    real = executor._run_chunk

    def counting(*a, **kw):
        why = real(*a, **kw)
        retries.append(why)
        return why
    monkeypatch.setattr(executor, "_run_chunk", counting)
    torch.manual_seed(0)
    base = torch.randn(32 * 128)

    def run(opts):
        x, keep = base.clone(), torch.empty_like(base)
        trace(**opts)(_update_then_copy)[(32,)](x, keep, BLOCK=128)
        return x, keep
    (o1, t1), (o2, t2) = run_both(run, 32)
    assert seen == ["x_ptr"]                                  # the first batched run read x as a view ...
    assert executor.RETRY in retries                          # ... then wrote it: run again, copying
    for a, b in zip(o1, o2):
        assert torch.equal(a, b)
    assert torch.equal(o2[1], base) and torch.equal(o2[0], base * 2 + 1)
    assert_same_traces(t1, t2)
    assert t2.launches[0].meta["execution"]["batched_programs"] == 32
