"""Property tests (hypothesis): generated tracebacks in generated noise.

Deterministic in CI: every test is ``derandomize=True`` with no example database, and states its
``max_examples``.
"""
from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracefix.knowledge import load_entries
from tracefix.matcher import match
from tracefix.reader import read_tracebacks

ENTRIES = load_entries()


def cfg(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- strategies ---------------------------------------------------------------------------------
KNOWN = [
    ("RuntimeError", "grad can be implicitly created only for scalar outputs", "nonscalar-backward"),
    ("RuntimeError", "grad can be implicitly created only for real scalar outputs but got torch.complex64",
     "nonscalar-backward"),
    ("RuntimeError", "one of the variables needed for gradient computation has been modified by an inplace "
                     "operation: [torch.FloatTensor [3, 4]], which is output 0 of ReluBackward0, is at version 1; "
                     "expected version 0 instead. Hint: enable anomaly detection to find the operation that failed "
                     "to compute its gradient, with torch.autograd.set_detect_anomaly(True).", "inplace-modification"),
    ("ValueError", "Attempting to unscale FP16 gradients.", "fp16-unscale"),
    ("RuntimeError", '"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for \'BFloat16\'',
     "bf16-unscale"),
]
UNKNOWN = [
    ("ValueError", "too many values to unpack (expected 2)", None),
    ("KeyError", "'input_ids'", None),
    ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB", None),
    ("AssertionError", "shapes differ", None),
    ("ZeroDivisionError", "division by zero", None),
]
KNOWN = [k for k in KNOWN if any(e.id == k[2] for e in ENTRIES)]   # entries still being written
EXCEPTIONS = KNOWN + UNKNOWN

# (module-level strategies: building them inside a composite makes hypothesis re-validate them per draw)
ident = st.builds(lambda a, b: a + b, st.sampled_from("abcdefghijklmnopqrstuvwxyz_"),
                  st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", max_size=10))
posix_path = st.builds(lambda parts, name: "/" + "/".join(parts + [name + ".py"]),
                       st.lists(ident, min_size=1, max_size=4), ident)
win_path = st.builds(lambda drive, parts, name: drive + ":\\" + "\\".join(parts + [name + ".py"]),
                     st.sampled_from("CDE"), st.lists(st.sampled_from(["Users", "me", "My Project", "src", "é"]),
                                                      min_size=1, max_size=3), ident)
code_line = st.one_of(
    st.builds(lambda a, b: f"{a} = {b}(x)", ident, ident),
    st.builds(lambda a: f"{a}.backward()", ident),
    st.builds(lambda a, b: f"return self.{a}({b})", ident, ident),
    st.just("raise RuntimeError("),
)


N_FRAMES, ANY_PATH, LINE_NO = st.integers(1, 8), st.one_of(posix_path, win_path), st.integers(1, 99999)
FUNC, CODE, BOOL = st.one_of(ident, st.just("<module>")), st.one_of(st.none(), code_line), st.booleans()


@st.composite
def frames(draw):
    n = draw(N_FRAMES)
    out = []
    for _ in range(n):
        path = draw(ANY_PATH)
        line = draw(LINE_NO)
        func = draw(FUNC)
        code = draw(CODE)
        caret = code is not None and draw(BOOL)
        text = f'  File "{path}", line {line}, in {func}\n'
        if code is not None:
            text += f"    {code}\n"
            if caret:
                text += "    " + "^" * max(1, len(code) - 2) + "\n"
        out.append(text)
    return out


FRAMES, EXC = frames(), st.sampled_from(EXCEPTIONS)


@st.composite
def traceback_text(draw):
    """(lines, expected (type, message, frame count, entry id))."""
    fr = draw(FRAMES)
    etype, msg, entry = draw(EXC)
    colour = draw(BOOL)
    head = f"\x1b[31m{etype}\x1b[0m" if colour else etype
    lines = ("Traceback (most recent call last):\n" + "".join(fr) + f"{head}: {msg}\n").splitlines()
    return lines, (etype, msg, len(fr), entry)


NOISE = st.sampled_from([
    "Epoch 1:  10%|#         | 1/10 [00:01<00:09]\rEpoch 1:  20%|##        | 2/10 [00:02<00:08]\r",
    "\x1b[32m2024-05-01 12:00:00,123 - INFO - step 5 loss 0.3\x1b[0m",
    "2024-05-01 12:00:01,500 - INFO - trainer - step 6 loss 0.29 grad_norm 1.2",
    "loading checkpoint shards: 100%|██████████| 2/2",
    "[W501 12:00:00.000000000 init.cpp:42] Warning: something (function foo)",
    "=====================",
    "",
])
PREFIX = st.sampled_from(["", "[rank3]:", "[rank3]: ", "[rank12]: ", "[default0]:", "[1,0]<stderr>:",
                          "2024-05-01 12:00:00,123 - ERROR - ", "E0501 12:00:00.123456 1234 foo.cpp:12] "])


def rank_of(prefix: str):
    for tag, r in (("[rank3]", 3), ("[rank12]", 12), ("[default0]", 0), ("[1,0]", 1)):
        if prefix.startswith(tag):
            return r
    return None


TB_TEXT, NOISE_0_5, NOISE_0_3 = traceback_text(), st.lists(NOISE, max_size=5), st.lists(NOISE.filter(bool), max_size=3)
N_TB = st.integers(1, 4)


@st.composite
def log_document(draw):
    """A whole log: noise, then tracebacks (some fenced, some chained), each ended by a blank line."""
    expected = []
    out = []
    for line in draw(NOISE_0_5):
        out.append(line)
    for _ in range(draw(N_TB)):
        prefix = draw(PREFIX)
        fence = draw(BOOL) and not prefix
        chained = draw(BOOL)
        tb_lines, exp = draw(TB_TEXT)
        block = list(tb_lines)
        exps = [(exp, chained)]
        if chained:
            tb2, exp2 = draw(TB_TEXT)
            block += ["", "The above exception was the direct cause of the following exception:", ""] + tb2
            exps.append((exp2, False))
        block.append("")
        if fence:
            block = ["```python"] + block[:-1] + ["```", ""]
        out += [prefix + ln if ln or not prefix.strip() else prefix for ln in block]
        expected += [(rank_of(prefix), e, cause) for e, cause in exps]
        out += draw(NOISE_0_3)
        out.append("")
    sep = "\r\n" if draw(BOOL) else "\n"
    return sep.join(out) + sep, expected


def read(data: bytes, **kw):
    return list(read_tracebacks(io.BytesIO(data), **kw))


def by_rank(items):
    out = defaultdict(list)
    for rank, value in items:
        out[rank].append(value)
    return dict(out)


# --- properties ---------------------------------------------------------------------------------
@cfg(300)
@given(st.one_of(st.binary(max_size=4000),
                 st.lists(st.sampled_from([b"Traceback (most recent call last):", b'  File "a.py", line 1, in f',
                                           b"    x()", b"    ^^^", b"RuntimeError: x", b"\x1b[31m", b"\r", b"\n",
                                           b"\xff\xfe", b"\x00", b"[rank1]:", b"```", b"> ", b"E   ",
                                           b"During handling of the above exception", b"Error detected in X.",
                                           b"Traceback of forward call that caused the error:",
                                           b"\xe2\x94\x82", b"\xe2\x95\xad", b"Cell In[3], line 2",
                                           b"  [Previous line repeated 3 more times]"]), max_size=60)
                 .map(b"\n".join)),
       st.integers(1, 5000))
def test_reader_never_raises(data, chunk_size):
    for tb in read(data, chunk_size=chunk_size):
        assert isinstance(tb.message, str)


@cfg(300)
@given(log_document())
def test_reader_finds_every_embedded_traceback(doc):
    text, expected = doc
    got = read(text.encode("utf-8"))
    want = by_rank((rank, (etype, msg, n)) for rank, (etype, msg, n, _entry), _cause in expected)
    have = by_rank((tb.rank, (tb.exc_type, tb.message, len(tb.frames))) for tb in got)
    assert have == want, text


@cfg(200)
@given(log_document())
def test_chain_marks_cause(doc):
    text, expected = doc
    got = read(text.encode("utf-8"))
    want = by_rank((rank, cause) for rank, _e, cause in expected)
    have = by_rank((tb.rank, tb.cause_of_next) for tb in got)
    assert have == want, text


@cfg(250)
@given(log_document(), st.integers(1, 5000), st.sampled_from(["utf-8", "utf-16"]))
def test_chunking_does_not_change_result(doc, chunk_size, codec):
    text, _ = doc
    data = text.encode(codec)
    whole = read(data)
    split = read(data, chunk_size=chunk_size)
    key = lambda tbs: by_rank((t.rank, (t.exc_type, t.message, t.frames, t.cause_of_next, t.line_no)) for t in tbs)
    assert key(split) == key(whole)


@cfg(250)
@given(traceback_text(), PREFIX, st.booleans(), st.booleans(), st.booleans())
def test_matcher_ignores_prefix_ansi_crlf_noise(tb, prefix, ansi, crlf, fenced):
    lines, (etype, msg, nframes, entry) = tb
    clean = read(("\n".join(lines) + "\n").encode())
    assert len(clean) == 1
    base = match(clean[0], ENTRIES)
    base_id = base.entry_id if base else None
    assert base_id == entry
    noisy = [prefix + (f"\x1b[1m{ln}\x1b[0m" if ansi and i % 2 else ln) for i, ln in enumerate(lines)]
    if fenced:
        noisy = ["```"] + noisy + ["```"]
    sep = "\r\n" if crlf else "\n"
    got = read((sep.join(["\x1b[32mstep 1 loss 0.5\x1b[0m\r", ""] + noisy + [""]) + sep).encode())
    assert len(got) == 1, got
    d = match(got[0], ENTRIES)
    assert (d.entry_id if d else None) == base_id
    if d is not None:
        assert d.fields == base.fields


@cfg(200)
@given(st.sampled_from(KNOWN), st.sampled_from(["", "  ", "\t", "**", "`"]), st.booleans())
def test_matcher_bare_message_same_answer(known, decor, typed):
    etype, msg, entry = known
    line = (f"{etype}: " if typed else "") + f"{decor}{msg}{decor}"
    got = read(f"some output\n{line}\n\nmore output\n".encode(), bare=_bare())
    hits = [match(t, ENTRIES) for t in got]
    assert [h.entry_id for h in hits if h] == [entry]


_BARE = []


def _bare():
    if not _BARE:
        from tracefix.matcher import BareMessage
        _BARE.append(BareMessage(ENTRIES))
    return _BARE[0]


# --- patches (over the patcher's fixtures in tests/patch_cases/) -------------------------------------
PATCH_CASES = Path(__file__).resolve().parent / "patch_cases"


def _patch_cases():
    if not PATCH_CASES.is_dir():
        return []
    return sorted(p for p in PATCH_CASES.rglob("*.in.py") if p.parent.parent == PATCH_CASES)


PREAMBLE = st.lists(st.sampled_from(["", "# a comment", "import os", "X = 1  # FIXME later",
                                     "def _unrelated(a):\n    return a * 2\n", '"""doc"""']), max_size=6)


@pytest.mark.skipif(not _patch_cases(), reason="tracefix.patcher fixtures not present")
@cfg(150)
@given(data=st.data())
def test_patch_fixtures_compile_and_apply_once(data, tmp_path_factory):
    """Shifted by a random preamble and line ending, every proposed patch compiles, and applying
    the recommended one twice is the same as applying it once."""
    import re

    from tracefix.patcher import apply, propose
    from tracefix.records import Diagnosis, FixSite, Traceback

    case = data.draw(st.sampled_from(_patch_cases()), label="case")
    pre = data.draw(PREAMBLE, label="preamble")
    crlf = data.draw(st.booleans(), label="crlf")
    src = case.read_text(encoding="utf-8")
    lines = src.splitlines()
    # keep a leading `from __future__` import (must stay first) and any encoding cookie on top
    head = 0
    while head < len(lines) and (lines[head].startswith(("from __future__", "# -*-", "#!"))):
        head += 1
    text = "\n".join(lines[:head] + [ln for chunk in pre for ln in chunk.split("\n")] + lines[head:]) + "\n"
    if crlf:
        text = text.replace("\n", "\r\n")
    root = tmp_path_factory.mktemp("patch")
    (root / "train.py").write_bytes(text.encode("utf-8"))
    fields = tuple(re.findall(r"# FIELDS: (\w+)=(\S+)", text))
    site = None
    for i, line in enumerate(text.splitlines(), 1):
        m = re.search(r"# FIX: ([a-z0-9-]+)", line)
        if m and not line.lstrip().startswith("#"):
            site = FixSite(path="train.py", line=i, code=line.strip(), local_path=str(root / "train.py"),
                           col=len(line) - len(line.lstrip()), reason="fixture", kind=m.group(1), score=1.0)
            break
    if site is None:
        return
    diag = Diagnosis(entry_id="t", title="t", confidence=1.0, traceback=Traceback(exc_type="RuntimeError", message="m"),
                     fields=fields, fix_sites=(site,))
    patches = propose(diag, root)
    for patch in patches:
        for rel, _old, new in patch.files:
            compile(new, rel, "exec")
    if not patches:
        return
    apply(patches[0], root)
    once = (root / "train.py").read_bytes()
    assert apply(patches[0], root) == []
    assert (root / "train.py").read_bytes() == once
    compile(once, "train.py", "exec")
    assert once.count(b"\r\n") == (once.count(b"\n") if crlf else 0)


# --- a big regular file is searched by offset, not streamed ---------------------------------------
PAD = st.lists(st.integers(0, 3), min_size=5, max_size=5)


@cfg(150)
@given(log_document(), PAD, st.sampled_from([4096, 5000, 8192]))
def test_file_search_finds_every_embedded_traceback(doc, pads, chunk_size):
    """The offset search (only the ends and a chunk around each header are read) finds what the
    document holds, with padding of up to three chunks between tracebacks to make real gaps."""
    import os
    import tempfile

    text, expected = doc
    filler = "2024-05-01 12:00:01,500 - INFO - trainer - step 6 loss 0.29 grad_norm 1.2\n"
    # Pad at blank lines, which end a traceback (and so do not split one).
    parts = text.replace("\r\n", "\n").split("\n\n")
    sep = "\r\n" if "\r\n" in text else "\n"
    padded = ""
    for i, part in enumerate(parts):
        padded += part + "\n\n" + filler * (pads[i % len(pads)] * chunk_size // len(filler))
    data = padded.replace("\n", sep).encode()
    fd, name = tempfile.mkstemp(suffix=".log")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        with open(name, "rb") as fh:
            got = list(read_tracebacks(fh, chunk_size=chunk_size, seek_min=0))
    finally:
        os.unlink(name)
    want = by_rank((rank, (etype, msg, n)) for rank, (etype, msg, n, _entry), _cause in expected)
    have = by_rank((tb.rank, (tb.exc_type, tb.message, len(tb.frames))) for tb in got)
    assert have == want, padded[:3000]
