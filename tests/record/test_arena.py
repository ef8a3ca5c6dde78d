"""numpy's allocations during a traced launch come from the arena (triton_trace/arena.py, arena.c): values
and zeros are what numpy would give, the handler is numpy's own again after every launch (failed ones too,
and in other threads all along), what the arena kept is unmapped when the last launch ends, and a launch
records the same bits with it as without it."""
import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.native import arena, cbuild
from helpers.arena import advised_huge, numpy_advises, numpy_handler, run_acc
from helpers.batch import assert_same_traces
from helpers.paths import ROOT, TESTS


needs_arena = pytest.mark.skipif(cbuild.compiler() is None or arena.DISABLED,
                                 reason="no C compiler here (or the arena is turned off)")
BIG = 3 << 20            # elements: float64 arrays of 24 MB, well above the arena's 1 MB threshold


@needs_arena
def test_values_zeros_and_resizes_inside_the_arena_are_numpy_s():
    default = numpy_handler()
    before = arena.stats()
    with arena.active():
        assert numpy_handler() == arena.NAME
        a = np.arange(BIG, dtype=np.float64)
        a[:] = 7.0
        del a                                             # kept, dirty
        z = np.zeros(BIG)                                 # served from the kept block: must be zeroed
        assert not z.any()
        half = np.zeros(BIG // 2, dtype=np.float64)       # a part of a larger kept block
        assert not half.any()
        r = np.arange(BIG // 2, dtype=np.float64)
        r.resize(BIG, refcheck=False)                     # through the handler's realloc
        assert (r[:BIG // 2] == np.arange(BIG // 2)).all()
        small = np.arange(10) * 3                         # below the threshold: malloc's
        assert small.tolist() == list(range(0, 30, 3))
        survivor = np.full(BIG, 2.5)
        during = arena.stats()
    assert numpy_handler() == default
    after = arena.stats()
    assert during["hits"] > before["hits"] and during["launches"] == 1
    assert after["kept_bytes"] <= arena._linger_limit() and after["launches"] == 0
    arena.release()
    assert arena.stats()["kept_bytes"] == 0 and arena.stats()["kept_blocks"] == 0
    assert (survivor == 2.5).all()                        # outlives the arena's launch, freed by its handler later
    del survivor, z, half, r


@needs_arena
def test_other_threads_keep_numpy_s_allocator():
    seen = []
    ready, done = threading.Event(), threading.Event()

    def other():
        ready.wait()
        seen.append(numpy_handler())
        done.set()
    t = threading.Thread(target=other)
    t.start()
    with arena.active():
        ready.set()
        done.wait(10)
    t.join()
    assert seen == ["default_allocator"]


@needs_arena
def test_a_launch_records_the_same_bits_with_and_without_the_arena(monkeypatch):
    triton_trace.reset()
    before = arena.stats()
    with_arena = run_acc()
    used = arena.stats()
    t1 = triton_trace.current_trace()
    triton_trace.reset()
    monkeypatch.setattr(arena, "_state", None)
    monkeypatch.setattr(arena, "DISABLED", True)         # numpy's own allocator
    without = run_acc()
    t2 = triton_trace.current_trace()
    assert used["hits"] + used["misses"] > before["hits"] + before["misses"]     # it was in use
    assert used["kept_bytes"] <= arena._linger_limit() and used["launches"] == 0
    assert torch.equal(with_arena.view(torch.int32), without.view(torch.int32))
    assert_same_traces(t1, t2)
    assert t1.launches[0].meta["execution"]["batched_programs"] == 64


@triton.jit(debug=True)
def _fails(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.device_assert(x < 100.0, "x must stay below 100")
    tl.store(x_ptr + offs, x * 2, mask=offs < n)


@needs_arena
def test_a_failing_launch_gives_numpy_its_allocator_back():
    default = numpy_handler()
    x = torch.zeros(1 << 20)
    x[123_456] = 1000.0
    with pytest.raises(Exception, match="x must stay below 100"):
        triton_trace.trace(_fails)[(256,)](x, x.numel(), BLOCK=4096)
    assert numpy_handler() == default
    assert arena.stats()["launches"] == 0 and arena.stats()["kept_bytes"] <= arena._linger_limit()


@needs_arena
def test_what_is_kept_stays_until_the_last_launch_inside_ends():
    """A launch that ends while another thread is still inside leaves the kept blocks to it."""
    want = run_acc().clone()
    inside, go_on, seen = threading.Event(), threading.Event(), []

    def other():
        with arena.active():
            big = np.ones(BIG)
            del big                                   # kept for this thread's launch
            inside.set()
            go_on.wait(30)
            seen.append(arena.stats())
    t = threading.Thread(target=other)
    t.start()
    inside.wait(30)
    got = run_acc()                                      # enters and leaves while the other is inside
    after_mine = arena.stats()
    go_on.set()
    t.join()
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert after_mine["launches"] == 1 and after_mine["kept_bytes"] > 0     # (its launch may have used a part)
    assert seen[0]["launches"] == 1
    assert arena.stats()["launches"] == 0 and arena.stats()["kept_bytes"] <= arena._linger_limit()
    arena.release()
    assert arena.stats()["kept_bytes"] == 0


@needs_arena
def test_launches_in_a_row_reuse_what_the_last_kept_until_it_is_unmapped(monkeypatch):
    """What the last launch out kept (up to the linger limit) serves the next launch's requests without new
    mappings; LINGER_S after the last launch, with none in, it is unmapped."""
    monkeypatch.setattr(arena, "LINGER_S", 0.3)
    arena.release()
    with arena.active():
        big = np.ones(BIG)
        recording = np.ones(BIG // 2)                     # outlives the launch (its trace), dropped before the next
        del big
    left = arena.stats()
    assert 0 < left["kept_bytes"] <= arena._linger_limit() and left["launches"] == 0
    del recording                                         # freed while lingering: kept too
    assert arena.stats()["kept_bytes"] > left["kept_bytes"]
    left = arena.stats()
    with arena.active():                                  # the next launch, at once
        again = np.ones(BIG)
        assert again[0] == again[-1] == 1.0                # (no large temporary: one block is kept)
        del again
    after = arena.stats()
    assert after["misses"] == left["misses"] and after["hits"] > left["hits"]
    deadline = time.monotonic() + 10
    while arena.stats()["kept_bytes"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert arena.stats()["kept_bytes"] == 0


@needs_arena
def test_nothing_is_unmapped_while_a_launch_is_in(monkeypatch):
    monkeypatch.setattr(arena, "LINGER_S", 0.05)
    with arena.active():
        np.ones(BIG)
    with arena.active():                                  # the trim comes while this launch is in
        time.sleep(0.3)
        inside = arena.stats()
        assert inside["launches"] == 1 and inside["kept_bytes"] > 0
        assert arena.release() == 0
        x = np.ones(BIG)                                  # served from what was kept
        assert arena.stats()["misses"] == inside["misses"]
        del x


def test_without_a_compiler_tracing_keeps_numpy_s_allocator(tmp_path):
    code = ("import torch, triton_trace\n"
            "from triton_trace.native import arena\n"
            "from helpers.arena import numpy_handler, run_acc\n"
            "out = run_acc()\n"
            "print(arena.failure())\n"
            "print(numpy_handler(), float(out.sum()) == float(out.sum()))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, TESTS]),
           "TRITON_TRACE_CACHE_DIR": str(tmp_path / "cache"), "PATH": str(tmp_path / "empty"),
           "TRITON_TRACE_NO_JIT": ""}
    env.pop("CC", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("OSError: no C compiler") and "arena.c" in lines[0]
    assert lines[1] == "default_allocator True"


# ------------------------------------------------------------------------------------------------------
# small pages (arena.small_pages): no huge-page advice for arrays made while a launch or an analysis runs
# ------------------------------------------------------------------------------------------------------
has_madvise = pytest.mark.skipif(arena._madvise_setter() is None or arena.HUGE_PAGES or
                                 not os.path.exists("/proc/self/smaps"),
                                 reason="numpy here gives no huge-page advice (not Linux), or "
                                        "TRITON_TRACE_HUGEPAGES=1")


@has_madvise
def test_launches_and_analyses_run_with_small_pages(monkeypatch):
    from triton_trace.analysis import analyzer
    from triton_trace.record import session
    setter = arena._madvise_setter()
    before = setter(True)
    try:
        seen = []
        run_grid, analyse = session._grid.run_grid, analyzer._analyze_launch

        def watched_run(*a, **k):
            seen.append(("launch", numpy_advises()))
            return run_grid(*a, **k)

        def watched_analysis(ctx):
            seen.append(("analysis", numpy_advises()))
            return analyse(ctx)
        monkeypatch.setattr(session._grid, "run_grid", watched_run)
        monkeypatch.setattr(analyzer, "_analyze_launch", watched_analysis)
        triton_trace.reset()
        run_acc(P=4)
        triton_trace.analyze(triton_trace.current_trace(), layouts="model")
        x = torch.zeros(1 << 20)
        x[5] = 1000.0
        with pytest.raises(Exception, match="x must stay below 100"):
            triton_trace.trace(_fails)[(256,)](x, x.numel(), BLOCK=4096)
        assert seen == [("launch", False), ("analysis", False), ("launch", False)]
        assert numpy_advises() is True                  # numpy's setting back, after a failing launch too
    finally:
        setter(before)


@has_madvise
def test_the_setting_comes_back_when_the_last_thread_leaves():
    setter = arena._madvise_setter()
    before = setter(True)
    try:
        inside, go_on, seen = threading.Event(), threading.Event(), []

        def other():
            with arena.small_pages():
                inside.set()
                go_on.wait(30)
                seen.append(numpy_advises())
        t = threading.Thread(target=other)
        t.start()
        inside.wait(30)
        with arena.small_pages():
            with arena.small_pages():
                seen.append(numpy_advises())
        seen.append(numpy_advises())                     # the other thread is still inside
        go_on.set()
        t.join()
        assert seen == [False, False, False] and numpy_advises() is True
    finally:
        setter(before)


@has_madvise
def test_arrays_made_inside_are_mapped_without_huge_page_advice(monkeypatch):
    """Checked on the mappings themselves (the kernel's VmFlags): numpy's arrays of 40 MB get huge-page advice
    outside, none inside, whether the arena or numpy's allocator serves them."""
    # 40 MB: above glibc's largest dynamic mmap threshold (32 MB), so numpy's own allocator maps each array
    # afresh instead of reusing heap that an earlier test's array left with advice on it
    size = 5 << 20
    # numpy's advice setting is one process-wide flag, and small_pages() only sets it for the first of its
    # users: a window still open (an earlier test's launch abandoned in a suspended frame, closed when the
    # collector finalizes it, or another thread's analysis) would keep it while this test turns the flag on.
    # Let such windows close first.
    deadline = time.monotonic() + 60
    while arena._pages_users and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert arena._pages_users == 0, "a small_pages() window of another thread stayed open for 60 s"
    setter = arena._madvise_setter()
    before = setter(True)
    try:
        outside = np.ones(size)
        assert advised_huge(outside)
        got = []
        for use_arena in ([True] if cbuild.compiler() is not None and not arena.DISABLED else []) + [False]:
            if not use_arena:
                monkeypatch.setattr(arena, "_state", None)
                monkeypatch.setattr(arena, "DISABLED", True)
            with arena.active():
                inside = np.ones(size)
                got.append((use_arena, numpy_handler() == arena.NAME, advised_huge(inside)))
                del inside
        assert all(served == use_arena and not huge for use_arena, served, huge in got), got
        assert advised_huge(np.ones(size))
    finally:
        setter(before)


def test_hugepages_1_keeps_numpy_s_advice():
    code = ("import numpy as np\n"
            "from triton_trace.native import arena\n"
            "from helpers.arena import advised_huge, numpy_advises\n"
            "with arena.active():\n"
            "    print(arena.HUGE_PAGES, numpy_advises(), advised_huge(np.ones(3 << 20)))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, TESTS]),
           "TRITON_TRACE_HUGEPAGES": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    want = "True True True" if os.path.exists("/proc/self/smaps") and arena._madvise_setter() else "True"
    assert done.stdout.split()[:len(want.split())] == want.split()


@needs_arena
def test_an_analysis_unmaps_what_the_last_launch_left(monkeypatch):
    monkeypatch.setattr(arena, "LINGER_S", 60.0)
    triton_trace.reset()
    run_acc(P=4)
    with arena.active():                                  # a launch whose temporaries were large
        np.ones(BIG)
    assert arena.stats()["kept_bytes"] > 0
    triton_trace.analyze(triton_trace.current_trace(), layouts="model")
    assert arena.stats()["kept_bytes"] == 0
