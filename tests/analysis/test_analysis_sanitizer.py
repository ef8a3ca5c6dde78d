"""The sanitizer on real kernels: every deliberately broken kernel of tests/kernels/broken.py is caught with
the right kind, program, tensor and source line; its corrected version is clean; check() fails readably."""
import os

import pytest

import triton_trace
from triton_trace.analysis.report import FindingsError
from helpers.release import TRITON_39, runnable
from kernels import broken
from kernels.broken import CASES

HERE = os.path.abspath(broken.__file__)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # a softmax over skipped lanes: -inf - -inf
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_broken_kernel_is_detected(case):
    runnable(case)
    case.run(case.broken, False)
    report = triton_trace.analyze(triton_trace.current_trace())
    found = [f for f in report.findings if f.kind == case.kind and f.tensor == case.tensor]
    assert found, report.summary()
    f = found[0]                                 # findings sort by program: the first offender
    assert f.program == case.program, report.summary()
    assert f.line == case.line
    if case.line is not None:
        assert f.file == HERE
    assert f.count > 0 and f.offsets and f.kernel == case.broken.fn.__name__
    if case.other_program is not None:
        assert (f.other["program"], f.other["line"]) == (case.other_program, case.other_line), f.message


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixed_kernel_is_clean(case):
    runnable(case)
    case.run(case.fixed, True)
    triton_trace.check(triton_trace.current_trace())


def test_there_are_at_least_twelve_runnable_cases():
    assert len([c for c in CASES if not (TRITON_39 and "block_pointer" in c.name)]) >= 12
    assert {c.kind for c in CASES} == {"out_of_bounds", "out_of_view", "race", "uninitialized_read",
                                       "unwritten_output", "double_write"}


def by_name(name):
    return next(c for c in CASES if c.name == name)


def test_out_of_bounds_finding_names_lanes_offsets_and_valid_range():
    case = by_name("off_by_one_mask")
    case.run(case.broken, False)
    f = triton_trace.analyze(triton_trace.current_trace()).findings[0]
    assert (f.kind, f.op, f.count, f.rows) == ("out_of_bounds", "load", 1, 1)
    assert f.offsets == (250,) and f.lanes == ((58,),) and f.indices == (None,)
    assert f.valid_range == (0, 249)
    d = f.to_dict()
    assert d["program"] == [3, 0, 0] and d["valid_range"] == [0, 249] and d["severity"] == "error"
    assert "valid 0..249" in f.message and "in program 3," in f.message


def test_check_raises_a_readable_assertion():
    case = by_name("two_programs_write_one_row")
    case.run(case.broken, False)
    with pytest.raises(AssertionError) as info:
        triton_trace.check(triton_trace.current_trace())
    assert isinstance(info.value, FindingsError)
    text = str(info.value)
    assert "race" in text and "rows_race" in text and f"broken.py:{case.line}" in text
    # programs 0 and 1 write row 0, programs 2 and 3 row 1: one cause (the store), four writers, two rows
    assert info.value.report.finding_counts["race"] == 1
    (f,) = info.value.report.findings
    assert f.extent["writers"]["count"] == 4 and f.count == f.extent["elements"]["count"] == 2 * 32
    assert "4 program(s) write" in text


def retraced(kernel, **options):
    """Re-decorate a case's kernel with other trace options; ``restore()`` puts its own back."""
    return triton_trace.trace(kernel, **options)


def restore(kernel):
    triton_trace.trace(kernel, outputs=("out",))


def test_the_recorder_can_stop_at_the_first_out_of_bounds_lane():
    case = by_name("stencil_left_edge")
    try:
        with pytest.raises(triton_trace.OutOfBoundsAccess):
            case.run(retraced(case.broken, outputs=("out",), on_oob="raise"), False)
    finally:
        restore(case.broken)


def test_unrecorded_programs_turn_off_the_order_dependent_checks():
    case = by_name("read_of_unwritten_output")
    try:
        case.run(retraced(case.broken, outputs=("out",), programs=[(1, 0, 0)]), False)
    finally:
        restore(case.broken)
    d = triton_trace.analyze(triton_trace.current_trace()).to_dict()
    assert d["findings"] == []
    assert d["launches"][0]["skipped_programs"] == 1 and d["launches"][0]["checks_skipped"]
