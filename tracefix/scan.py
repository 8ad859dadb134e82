"""Where a needle occurs in a big regular file: the byte ranges of a GB log worth parsing.

Positional reads, not ``mmap``: a log truncated under us (logrotate's copytruncate) must shorten
the scan, not kill the process with SIGBUS.  ``bytes.find`` holds the GIL, so threads cannot
share the work; on Linux with two or more cores one forked child scans the second half.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, List, Optional, Tuple

PIECE = 1 << 20
PARALLEL_MIN = 64 << 20        # below this a fork costs more than it saves

ReadAt = Callable[[int, int], bytes]
Region = Tuple[int, int]


def reader_at(stream) -> ReadAt:
    """``read_at(offset, size)`` for the file behind ``stream``, without moving a shared offset."""
    pread = getattr(os, "pread", None)
    if pread is not None:
        fd = stream.fileno()
        return lambda offset, size: pread(fd, size, offset)

    def read_at(offset: int, size: int) -> bytes:   # Windows: no pread; the scan is sequential there
        stream.seek(offset)
        return stream.read(size)

    return read_at


def merge(regions: List[Region], slack: int = 0) -> List[Region]:
    """Sorted union of ``regions``; ranges closer than ``slack`` bytes are joined."""
    out: List[List[int]] = []
    for lo, hi in sorted(regions):
        if out and lo <= out[-1][1] + slack:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def _scan(read_at: ReadAt, needle: bytes, start: int, end: int, context: int) -> List[Region]:
    """Each hit starting in [start, end), widened by ``context`` bytes on each side, merged."""
    out: List[List[int]] = []
    k = len(needle) - 1
    pos = start
    while pos < end:
        n = min(PIECE, end - pos)
        buf = read_at(pos, n + k)          # k bytes of overlap: a hit across the seam is seen once
        i = buf.find(needle)
        while 0 <= i < n:
            lo, hi = pos + i - context, pos + i + len(needle) + context
            if out and lo <= out[-1][1]:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
            i = buf.find(needle, i + 1)
        if len(buf) < n:                   # the file shrank while we read it
            break
        pos += n
    return [(lo, hi) for lo, hi in out]


def _can_fork() -> bool:
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if cores < 2:
        return False
    import threading  # a fork with other threads running may deadlock in the child

    return threading.active_count() == 1


def _encode(regions: List[Region]) -> bytes:
    return b"".join(b"%d %d\n" % r for r in regions) + b"end\n"


def _decode(data: bytes) -> Optional[List[Region]]:
    lines = data.split(b"\n")
    if len(lines) < 2 or lines[-2] != b"end" or lines[-1]:
        return None                        # the child died before it finished
    try:
        return [(int(a), int(b)) for a, b in (line.split() for line in lines[:-2])]
    except ValueError:
        return None


def _spawn(read_at: ReadAt, needle: bytes, start: int, end: int, context: int) -> Optional[Tuple[int, int]]:
    """Start scanning [start, end) in a forked child: (pid, pipe to read), or None."""
    try:
        rfd, wfd = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return None
    if pid == 0:                           # the child: never return into the caller's code
        code = 1
        try:
            os.close(rfd)
            data = memoryview(_encode(_scan(read_at, needle, start, end, context)))
            while data:
                data = data[os.write(wfd, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    return pid, rfd


def _collect(pid: int, rfd: int) -> Optional[List[Region]]:
    """The child's regions; None when it failed before it finished."""
    parts = []
    try:
        while True:
            piece = os.read(rfd, 1 << 16)
            if not piece:
                break
            parts.append(piece)
    finally:
        os.close(rfd)
        _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    return _decode(b"".join(parts))


def regions(read_at: ReadAt, needle: bytes, start: int, end: int, context: int,
            parallel: bool = True) -> List[Region]:
    """Merged ``context``-wide ranges around every ``needle`` that starts in [start, end)."""
    if parallel and end - start >= PARALLEL_MIN and _can_fork():
        mid = (start + end) // 2
        child = _spawn(read_at, needle, mid, end, context)
        if child is not None:
            pid, rfd = child
            try:
                first = _scan(read_at, needle, start, mid, context)
            finally:                       # reap the child even when we are interrupted
                second = _collect(pid, rfd)
            if second is None:
                second = _scan(read_at, needle, mid, end, context)
            return merge(first + second)
    return _scan(read_at, needle, start, end, context)
