"""Programs ordered by a ticket counter (analysis/checks/races.py): "the last program to take a ticket reads
every program's part" is not a race; reading the parts after any ticket is, and so are two programs storing
one element before their tickets. Which elements race is counted again here from the kernels' indexing."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from helpers.findings import traced_report
from helpers.source import marked_line
from kernels import sync_kernels as K

G, BLOCK, SHORT = 6, 32, 5


def findings(kernel, batch, fenced=True):
    n = G * BLOCK - SHORT
    x = torch.randn(n)
    part, count, out = torch.zeros(G * BLOCK), torch.zeros(1, dtype=torch.int32), torch.zeros(G)
    _, report = traced_report(kernel, (G,), x, part, count, out, n, BLOCK=BLOCK, batch=batch)
    return report.findings, x, out


@pytest.mark.parametrize("batch", [True, False])
def test_the_last_ticket_reads_every_part_without_a_race(batch):
    for kernel in (K.last_program_sums_fenced, K.last_program_sums):
        found, x, out = findings(kernel, batch)
        assert abs(out[0].item() - 2 * x.sum().item()) < 1e-3
        assert "race" not in {f.kind for f in found}, [f.message for f in found if f.kind == "race"]


@pytest.mark.parametrize("batch", [True, False])
def test_reading_after_an_earlier_ticket_is_a_race(batch):
    found, x, out = findings(K.every_program_sums, batch)
    (race,) = [f for f in found if f.kind == "race"]
    n = G * BLOCK - SHORT
    # program q (tickets in program order) reads part p before p published it when p > q: every element of
    # the parts of programs 1..G-1 is read too early by some program; program 0's part by nobody
    want = np.arange(BLOCK, n)
    assert race.extent["elements"]["count"] == len(want)
    assert race.extent["elements"]["ranges"] == [[int(want[0]), int(want[-1])]]
    assert race.tensor == "part_ptr"
    assert race.other["line"] == marked_line(K.every_program_sums, "# READ")


@pytest.mark.parametrize("batch", [True, False])
def test_two_programs_storing_one_element_before_their_tickets_race(batch):
    found, *_ = findings(K.shared_part_sums, batch)
    (race,) = [f for f in found if f.kind == "race"]
    assert race.line == marked_line(K.shared_part_sums, "# STORE")
    assert race.extent["elements"]["count"] == BLOCK
    assert race.extent["writers"]["count"] == G
