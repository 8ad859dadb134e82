"""tracefix.scan: where a needle occurs in a big file, searched in pieces and, on Linux, in two
processes.  Every answer is checked against a brute-force search of the same bytes."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracefix import scan

NEEDLE = b"most recent call last"


def brute(data: bytes, needle: bytes, start: int, end: int, context: int):
    spans, at = [], data.find(needle, start)
    while 0 <= at < end:
        spans.append((at - context, at + len(needle) + context))
        at = data.find(needle, at + 1)
    return scan.merge(spans)


def read_at_of(data: bytes):
    return lambda offset, size: data[offset:offset + size]


def build(offsets, size: int, filler: bytes = b"x") -> bytes:
    buf = bytearray(filler * size)
    for at in offsets:
        buf[at:at + len(NEEDLE)] = NEEDLE
    return bytes(buf[:size])


def test_merge_joins_overlapping_and_close_ranges():
    assert scan.merge([(10, 20), (0, 5), (18, 30)]) == [(0, 5), (10, 30)]
    assert scan.merge([(0, 5), (8, 9)], slack=3) == [(0, 9)]
    assert scan.merge([(0, 5), (9, 10)], slack=3) == [(0, 5), (9, 10)]
    assert scan.merge([]) == []


def test_hit_across_a_piece_seam_is_found_once(monkeypatch):
    monkeypatch.setattr(scan, "PIECE", 64)
    data = build([50, 128 - 3, 300], 400)   # the first two straddle a 64-byte seam
    got = scan.regions(read_at_of(data), NEEDLE, 0, len(data), 0, parallel=False)
    assert got == [(50, 50 + len(NEEDLE)), (125, 125 + len(NEEDLE)), (300, 300 + len(NEEDLE))]


def test_range_owns_the_hits_that_start_in_it():
    data = build([100, 200], 300)
    # A hit that starts before `end` belongs to the range even though it ends after it.
    assert scan.regions(read_at_of(data), NEEDLE, 0, 101, 5, parallel=False) == [(95, 100 + len(NEEDLE) + 5)]
    assert scan.regions(read_at_of(data), NEEDLE, 101, 300, 5, parallel=False) == [(195, 200 + len(NEEDLE) + 5)]


def test_file_that_shrinks_under_the_scan_stops_cleanly():
    data = build([10, 5000], 6000)
    short = data[:3000]                       # truncated after we took its size
    assert scan.regions(read_at_of(short), NEEDLE, 0, len(data), 4, parallel=False) == \
        [(6, 10 + len(NEEDLE) + 4)]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 3000), max_size=12), st.integers(1, 200), st.integers(0, 300),
       st.integers(0, 3100), st.integers(0, 3100))
def test_regions_equal_brute_force(offsets, piece, context, a, b):
    data = build(offsets, 3100, filler=b"most recent call las\n")   # near misses everywhere
    start, end = min(a, b), max(a, b)
    old, scan.PIECE = scan.PIECE, piece
    try:
        got = scan.regions(read_at_of(data), NEEDLE, start, end, context, parallel=False)
    finally:
        scan.PIECE = old
    assert got == brute(data, NEEDLE, start, end, context)


CHILD = textwrap.dedent("""
    import json, os, sys
    from tracefix import scan
    scan.PIECE = 4096
    scan.PARALLEL_MIN = 0
    forks = []
    real_fork = os.fork
    def counting_fork():
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid
    os.fork = counting_fork
    parent = os.getpid()
    if sys.argv[2] == "child-fails":
        real_scan = scan._scan
        def failing_scan(*a, **k):
            if os.getpid() != parent:
                raise MemoryError("the child dies")
            return real_scan(*a, **k)
        scan._scan = failing_scan
    with open(sys.argv[1], "rb") as f:
        got = scan.regions(scan.reader_at(f), b"most recent call last", 0, os.fstat(f.fileno()).st_size, 1000)
    print(json.dumps({"forks": len(forks), "regions": got}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parallel scan forks on Linux only")
@pytest.mark.parametrize("mode", ["ok", "child-fails"])
def test_parallel_scan_equals_sequential(tmp_path, mode):
    # Hits at both ends, around the middle (where the two processes meet) and straddling it.
    size = 400_000
    mid = size // 2
    offsets = [0, 5, 90_000, mid - 10, mid - 3, mid + 1, 300_000, size - len(NEEDLE)]
    data = build(offsets, size, filler=b"step 1 loss 0.5 grad_norm 1.0\n")
    log = tmp_path / "big.log"
    log.write_bytes(data)
    r = subprocess.run([sys.executable, "-c", CHILD, str(log), mode], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    if out["forks"] == 0:
        pytest.skip("only one CPU available here: the scan stays sequential")
    assert [tuple(x) for x in out["regions"]] == brute(data, NEEDLE, 0, size, 1000)
