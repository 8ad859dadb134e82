"""Long files take shortcuts: libcst parses only the part a fix needs (cstedit.Source with
``keep``), a patch compiles only the statements it touched (text.compiles), and a diff is computed
on the lines that differ (text.unified_diff).  Each must give exactly what the long way gives."""
import difflib
import random
import re
import shutil
from pathlib import Path

import pytest

import tracefix.patcher.context as context
import tracefix.patcher.cstedit as cstedit
from conftest import SAMPLE_LIST
from test_patcher import _cases, _files, diag_for, find_site
from tracefix.knowledge import load_entries
from tracefix.patcher import propose
from tracefix.patcher.cstedit import NeedWhole, Source
from tracefix.patcher import text as textmod
from tracefix.pipeline import diagnose

ALWAYS, NEVER = 0, 10 ** 9
DEFAULT = cstedit.PARTIAL_MIN_LINES

# Filler that shares no name with a training loop: what a big model file holds around it.
FILLER = "".join(
    f"\n\nclass Unrelated{i}:\n    \"\"\"Filler {i}.\"\"\"\n\n    def __init__(self, width=3):\n"
    f"        self.width = width + {i}\n\n    def area(self):\n        return self.width * self.width\n"
    for i in range(60))


class Counter:
    def __init__(self, monkeypatch):
        self.partial = self.whole = 0
        elide, needs_whole = cstedit._elide, context.Context.needs_whole

        def counted_elide(text, keep):
            got = elide(text, keep)
            self.partial += got is not None
            return got

        def counted_needs_whole(ctx):
            self.whole += 1
            needs_whole(ctx)

        monkeypatch.setattr(cstedit, "_elide", counted_elide)
        monkeypatch.setattr(context.Context, "needs_whole", counted_needs_whole)


def _patches(report):
    return [[(p.summary, p.applicability, p.reason, p.diff, p.files) for p in d.patches] for d in report.diagnoses]


def _sample_patches(root: Path, monkeypatch, min_lines: int):
    monkeypatch.setattr(cstedit, "PARTIAL_MIN_LINES", min_lines)
    with open(root / "crash.log", "rb") as log:
        return _patches(diagnose(log, load_entries(), root, patches=True))


def test_every_sample_gets_the_same_patches_parsed_in_part(monkeypatch):
    counter = Counter(monkeypatch)
    for sample in SAMPLE_LIST:
        whole = _sample_patches(sample.dir, monkeypatch, NEVER)
        assert any(whole), sample.name
        assert _sample_patches(sample.dir, monkeypatch, ALWAYS) == whole, sample.name
    # both paths ran: most samples are answered from the kept part, some needed the whole file
    assert counter.partial >= len(SAMPLE_LIST) // 2
    assert counter.whole >= 1


@pytest.mark.parametrize("case, variant", [c for c in _cases() if c.values[1] == "lf"])
def test_every_fixture_gets_the_same_patches_parsed_in_part(case, variant, tmp_path, monkeypatch):
    files = _files(case)
    for name, src, _ in files:
        (tmp_path / name).write_bytes(src.read_bytes())
    site, fields = find_site(tmp_path, [n for n, _, _ in files])
    monkeypatch.setattr(cstedit, "PARTIAL_MIN_LINES", NEVER)
    whole = propose(diag_for([site], fields), tmp_path)
    monkeypatch.setattr(cstedit, "PARTIAL_MIN_LINES", ALWAYS)
    part = propose(diag_for([site], fields), tmp_path)
    assert [(p.summary, p.applicability, p.diff) for p in part] == [(p.summary, p.applicability, p.diff) for p in whole]


@pytest.mark.parametrize("name", ["nonscalar-weighted-mse", "inplace-wgan-clip-loop", "fp16-lora-to-float16"])
def test_a_long_file_is_parsed_in_part_and_patched_as_a_short_one(name, tmp_path, monkeypatch):
    """The sample's own script with 600 lines of classes appended: the log still maps (its lines
    did not move), the default threshold parses it in part, and the patches are the short file's."""
    sample = next(s for s in SAMPLE_LIST if s.name == name)
    root = tmp_path / name
    shutil.copytree(sample.dir, root)
    short = _sample_patches(root, monkeypatch, NEVER)
    train = root / "train.py"
    train.write_text(train.read_text() + FILLER)
    assert train.read_text().count("\n") > 600
    counter = Counter(monkeypatch)
    long = _sample_patches(root, monkeypatch, DEFAULT)
    assert counter.partial >= 1
    assert long == _sample_patches(root, monkeypatch, NEVER)
    tail = FILLER.count("\n")
    for (s_sum, s_app, _r, _d, s_files), (l_sum, l_app, _r2, _d2, l_files) in zip(short[0], long[0]):
        assert (s_sum, s_app) == (l_sum, l_app)
        for (rel, _old, s_new), (rel2, _old2, l_new) in zip(s_files, l_files):
            assert rel == rel2
            if rel == "train.py":
                assert l_new == s_new + FILLER and l_new.count("\n") - tail == s_new.count("\n")
            compile(l_new, rel, "exec")


TEXT = "import torch\n" + FILLER + """

def train(model, loader):
    crit = torch.nn.MSELoss(reduction="none")
    for x, y in loader:
        loss = crit(model(x), y)
        loss.backward()


loss = train(None, [])
"""


def _line(text: str, code: str) -> int:
    return next(i for i, ln in enumerate(text.split("\n"), 1) if code in ln)


def test_source_in_part_answers_locally_and_refuses_the_rest(monkeypatch):
    import libcst as cst
    monkeypatch.setattr(cstedit, "PARTIAL_MIN_LINES", 100)
    at = _line(TEXT, "reduction=")
    part, whole = Source(TEXT, keep=[at]), Source(TEXT)
    assert part.partial and not whole.partial
    assert len(part.elided) == 60 * 8 and at not in part.elided
    # a local question: same node, same place
    arg = part.find(at, 0, cst.Arg, lambda a: a.keyword is not None)
    assert part.code(arg) == whole.code(whole.find(at, 0, cst.Arg, lambda a: a.keyword is not None))
    assert part.positions[arg] == whole.positions[whole.find(at, 0, cst.Arg, lambda a: a.keyword is not None)]
    # an edit comes back as an edit of the whole text
    new = part.replace(arg.value, lambda n: n.with_changes(value='"mean"'))
    assert new == TEXT.replace('reduction="none"', 'reduction="mean"')
    # whole-module questions, blanked lines and the module's own body need the whole file
    with pytest.raises(NeedWhole):
        part.all(cst.ClassDef)
    with pytest.raises(NeedWhole):
        part.find(_line(TEXT, "class Unrelated7"), 0, cst.ClassDef)
    top = part.statement_of(part.find(_line(TEXT, "loss = train"), 0, cst.Assign))
    with pytest.raises(NeedWhole):
        part.parent(top)
    with pytest.raises(NeedWhole):
        part.in_statement_of(part.module, cst.Name)
    assert len(whole.all(cst.ClassDef)) == 60


def test_short_files_and_files_without_functions_are_parsed_whole():
    assert not Source("import torch\nloss.backward()\n", keep=[2]).partial
    flat = "import torch\n" + "x = torch.ones(3)\n" * 900
    assert not Source(flat, keep=[2]).partial
    assert Source(flat, keep=[2]).all_on_line(2, object)


# -- compiling only what an edit touched --------------------------------------------------------
BASE = ["import torch", ""]
for _i in range(200):
    BASE += [f"class C{_i}:", "    def f(self, x):", f"        y = x + {_i}", "        for k in range(3):",
             "            y += k", "        return y", "", f"def g{_i}(a):", "    '''doc", "text'''", "    return a", ""]
BASE += ["if __name__ == '__main__':", "    print(g1(2))", ""]
# lines that are fine in some places and a syntax error in others
POOL = ["    x = (", "return 1", "    y = 2", "def g(:", "    break", "        break", "    global q", "global a",
        "print(1)", "  z = 3", "        nonlocal y", "'''", "x = 1 \\", "    yield 1", "        await x", "@dec",
        "from __future__ import annotations", "    pass", "class D:", "        return y", ")", "        (",
        "        )", "\tq = 1", "async def h():", "        continue"]


def _full_compile(text: str) -> bool:
    try:
        compile(text, "f.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


@pytest.mark.parametrize("seed", range(4))
def test_compiling_the_touched_statements_agrees_with_compiling_the_file(seed):
    old = "\n".join(BASE)
    assert len(old) > textmod.COMPILE_WHOLE_BELOW
    rng = random.Random(seed)
    verdicts = set()
    for _ in range(150):
        lines = list(BASE)
        for _edit in range(rng.randint(1, 2)):
            i, op = rng.randrange(len(lines)), rng.random()
            if op < 0.5:
                lines[i] = rng.choice(POOL)
            elif op < 0.8:
                lines.insert(i, rng.choice(POOL))
            else:
                del lines[i]
        new = "\n".join(lines)
        full = _full_compile(new)
        assert textmod.compiles(old, new, "f.py") == full, difflib.unified_diff(BASE, lines, lineterm="")
        verdicts.add(full)
    assert verdicts == {True, False}


def _apply(before: str, diff: str) -> str:
    src, out, i = before.splitlines(keepends=True), [], 0
    lines = diff.splitlines(keepends=True)[2:]
    for line in lines:
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", line)
        if m:
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            to = start - 1 if count else start
            out += src[i:to]
            i = to
        elif line[0] == " ":
            assert src[i] == line[1:]
            out.append(src[i])
            i += 1
        elif line[0] == "-":
            assert src[i] == line[1:]
            i += 1
        else:
            out.append(line[1:])
    return "".join(out + src[i:])


@pytest.mark.parametrize("seed", range(3))
def test_a_diff_of_the_lines_that_differ_applies_like_the_whole_diff(seed, monkeypatch):
    monkeypatch.setattr(textmod, "TRIM_DIFF_ABOVE", 0)
    rng = random.Random(seed)
    for _ in range(500):
        lines = [rng.choice(["a", "b", "", "x = 1"]) + "\n" for _ in range(rng.randint(1, 40))]
        new = list(lines)
        for _edit in range(rng.randint(1, 3)):
            i, op = rng.randint(0, len(new)), rng.random()
            if op < 0.4:
                new.insert(i, rng.choice(["q\n", "a\n", "\n"]))
            elif op < 0.7 and i < len(new) and len(new) > 1:
                del new[i]
            elif i < len(new):
                new[i] = "changed\n"
        before, after = "".join(lines), "".join(new)
        diff = textmod.unified_diff("f.py", before, after)
        assert (diff == "") == (before == after)
        if diff:
            assert _apply(before, diff) == after
