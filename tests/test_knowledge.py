"""Knowledge entries: schema, and every entry's own examples replayed (thefuck/TorchFix style)."""
import io
import marshal
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tracefix.families import families
from tracefix.knowledge import BUILTIN_DIR, KnowledgeError, Pattern, load_entries, load_entry, needle, \
    write_heads_cache
from tracefix.pipeline import collect
from tracefix.reader import FULL_SCAN
from tracefix.record import replace

ENTRIES = load_entries(examples=True)
KNOWN = {entry_id for fam in families() for entry_id in fam.entries}


def _through_heads_cache(tmp: Path):
    """ENTRIES with the patterns a wheel install loads: from the heads cache the build writes,
    compiled on first use and searched only where their needle is."""
    shutil.copytree(BUILTIN_DIR, tmp, ignore=shutil.ignore_patterns("__pycache__"))
    cache = marshal.loads(write_heads_cache(tmp).read_bytes())
    out = []
    for e in ENTRIES:
        name = Path(e.source).name
        fast = load_entry(tmp / name, examples=False, cached=cache[name])
        out.append(replace(e, patterns=fast.patterns, exclude=fast.exclude))
    return out


@pytest.fixture(scope="module")
def cached_entries(tmp_path_factory):
    return _through_heads_cache(tmp_path_factory.mktemp("knowledge") / "k")


@pytest.fixture(params=["as loaded", "from the wheel's heads cache"])
def entries(request):
    return ENTRIES if request.param == "as loaded" else request.getfixturevalue("cached_entries")


def diagnose_text(text, entries=ENTRIES):
    return collect(io.BytesIO(text.encode("utf-8")), entries)


def test_builtin_entries_present_and_unique():
    ids = [e.id for e in ENTRIES]
    assert KNOWN <= set(ids)
    assert len(ids) == len(set(ids))


def test_runtime_load_skips_examples_but_keeps_the_rest():
    fast = {e.id: e for e in load_entries()}
    for e in ENTRIES:
        f = fast[e.id]
        assert f.patterns == e.patterns and f.explain == e.explain and f.keywords == e.keywords
        assert not f.examples


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_entry_is_complete(entry):
    assert entry.examples, "each entry carries its own positive examples"
    assert entry.counterexamples, "each entry carries near-miss counterexamples"
    for key in ("what", "why", "fix", "fix_safety"):
        assert len(entry.explanation(key)) > 40
    assert all(len(k) >= 10 for k in entry.keywords)


POSITIVE = [(e, ex) for e in ENTRIES for ex in e.examples]
NEGATIVE = [(e, ex) for e in ENTRIES for ex in e.counterexamples]


@pytest.mark.parametrize("entry,example", POSITIVE, ids=[f"{e.id}:{x.name}" for e, x in POSITIVE])
def test_example_is_recognised(entry, example, entries):
    report = diagnose_text(example.log, entries)
    ids = [d.entry_id for d in report.diagnoses]
    assert ids and set(ids) == {entry.id}, (ids, report.unrecognized)
    got = dict(report.diagnoses[0].fields)
    for k, v in example.fields:
        assert got.get(k) == v, (k, got)


@pytest.mark.parametrize("entry,example", NEGATIVE, ids=[f"{e.id}:{x.name}" for e, x in NEGATIVE])
def test_counterexample_is_not_recognised(entry, example, entries):
    report = diagnose_text(example.log, entries)
    assert entry.id not in [d.entry_id for d in report.diagnoses]


def test_the_heads_cache_gives_most_patterns_a_needle(cached_entries):
    pats = [p for e in cached_entries for p in (*e.patterns, *e.exclude)]
    with_needle = [p for p in pats if p.needle]
    assert len(with_needle) >= 0.8 * len(pats), [p.pattern for p in pats if not p.needle]
    for p in with_needle:
        assert p.needle == p.needle.lower() and p.needle.isascii()


def test_a_pattern_is_compiled_only_for_a_text_that_holds_its_needle():
    p = Pattern("Found dtype (?P<got>\\w+) but", needle("Found dtype (?P<got>\\w+) but"))
    assert p.needle == "found dtype " and p._rx is None
    assert p.search("RuntimeError: mat1 and mat2 shapes cannot be multiplied") is None and p._rx is None
    assert p.search("FOUND DTYPE Long but expected Float").group("got") == "Long" and p._rx is not None
    assert all(p._rx is not None for e in ENTRIES for p in e.patterns)   # loaded without a needle: compiled


@pytest.mark.parametrize("pattern,expected", [
    ("Trying to backward through the graph a second time", "trying to backward through the graph a second time"),
    (r"mat1 and mat2 (?:shapes|x) cannot be", "mat1 and mat2 "),
    (r"Can't call numpy\(\) on (?P<what>Tensor|Variable)", "can't call numpy() on "),
    ("abc|defgh", ""),                 # a branch: neither side is in every match
    ("ab?cd", ""),                     # runs "a" and "cd" are too short
    (r"x\.yz\d", "x.yz"),
    ("(unscale FP16)", ""),            # inside a group: not counted
    ("(?:unscale FP16)", "unscale fp16"),   # re itself flattens a plain non-capturing group
    ("Ünïcode only here", "code only here"),
    ("[", ""),                         # not a regex: no needle (and no crash)
])
def test_needle_is_a_run_every_match_holds(pattern, expected):
    assert needle(pattern) == expected


_PATTERNS = sorted({p.pattern for e in ENTRIES for p in (*e.patterns, *e.exclude)})
_MESSAGES = [x.log for e in ENTRIES for x in (*e.examples, *e.counterexamples)]


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(_PATTERNS), base=st.sampled_from(_MESSAGES), cut=st.integers(0, 400),
       noise=st.text(alphabet="aAsSkKiI \u017f\u212a\u0130\u0131()'_.:", max_size=6), upper=st.booleans())
def test_a_pattern_with_its_needle_answers_as_the_regex_does(pattern, base, cut, noise, upper):
    """Texts near the patterns (the entries' own example logs cut, upper-cased, with letters that
    fold to ASCII ones under re.IGNORECASE spliced in): the needle never turns a match away."""
    text = base[:cut] + noise + base[cut:]
    if upper:
        text = text.upper()
    fast = Pattern(pattern, needle(pattern))
    assert bool(fast.search(text)) == bool(re.search(pattern, text, re.IGNORECASE))


def test_near_misses_match_no_entry_at_all():
    """Near misses belong to no family (a counterexample may legitimately be another entry's hit)."""
    others_positive = {x.log for _, x in POSITIVE}
    for entry, example in NEGATIVE:
        if example.log in others_positive:
            continue
        ids = [d.entry_id for d in diagnose_text(example.log).diagnoses]
        assert ids == [] or entry.id not in ids, (entry.id, example.name, ids)


def test_big_log_finds_every_example_at_its_end_and_tracebacks_in_its_middle():
    """Past the always-parsed head a chunk is parsed only near a traceback header; the end always is."""
    line = b"step 1 | loss 0.1234 | grad_norm 0.8 | lr 1e-4 | it/s 35.1\n"
    past_head = line * (FULL_SCAN // len(line) + 1000)      # the example starts past FULL_SCAN
    gap = line * 20000                                       # more than a chunk between two tracebacks
    for e in ENTRIES:
        middle = [past_head]
        for ex in e.examples:
            tail = past_head + ex.log.encode() + b"\n"
            assert e.id in [d.entry_id for d in collect(io.BytesIO(tail), ENTRIES).diagnoses], (e.id, ex.name)
            if "most recent call last" in ex.log:
                middle += [ex.log.encode(), b"\n", gap]
        if len(middle) > 1:     # the entry's every traceback example, each in the middle of one log
            report = collect(io.BytesIO(b"".join(middle + [past_head])), ENTRIES)
            got = [d for d in report.diagnoses if d.entry_id == e.id]
            assert len(got) == (len(middle) - 1) // 3, (e.id, len(got))


BROKEN = [
    ('title = "x"\n', "missing field 'id'"),
    ('id = "Bad Id"\n', "field 'id'"),
    ('id = "x"\ntitle = "t"\nexception_types = ["E"]\nkeywords = ["kkkkkkkkkkkk"]\npatterns = ["("]\n'
     '[explain]\nwhat="w"\nwhy="y"\nfix="f"\nfix_safety="s"\n', "patterns[0]"),
    ('id = "x"\ntitle = "t"\nexception_types = ["E"]\nkeywords = ["kkkkkkkkkkkk"]\npatterns = ["a"]\n'
     '[explain]\nwhat="w"\nwhy="y"\nfix="f"\n', "explain.fix_safety"),
    ('id = "x"\n[[examples\n', "invalid TOML"),
    ('id = "x"\ntitle = "t"\nexception_types = ["E"]\nkeywords = ["kkkkkkkkkkkk"]\npatterns = ["a"]\n'
     '[explain]\nwhat="w"\nwhy="y"\nfix="f"\nfix_safety="s"\n[explain.fix_for]\nsome-kind = ""\n', "explain.fix_for"),
]


@pytest.mark.parametrize("text,needle", BROKEN)
def test_broken_user_entry_names_file_and_field(tmp_path, text, needle):
    p = tmp_path / "mine.toml"
    p.write_text(text)
    with pytest.raises(KnowledgeError) as info:
        load_entries([tmp_path])
    assert "mine.toml" in str(info.value) and needle in str(info.value)


def test_user_entry_extends_the_base(tmp_path):
    (tmp_path / "oom.toml").write_text(
        'id = "cuda-oom"\ntitle = "Out of GPU memory"\nexception_types = ["OutOfMemoryError"]\n'
        'keywords = ["CUDA out of memory"]\npatterns = [\'CUDA out of memory\']\n'
        '[explain]\nwhat="w"\nwhy="y"\nfix="f"\nfix_safety="s"\n')
    entries = load_entries([tmp_path])
    report = collect(io.BytesIO(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"), entries)
    assert [d.entry_id for d in report.diagnoses] == ["cuda-oom"]


def test_how_to_fix_follows_the_kind_of_the_first_fix_site():
    """[explain.fix_for] gives a fix-site kind its own "How to fix" line (an optimizer step between
    two backward() calls is not fixed by an out-of-place write); other kinds keep the general one."""
    from tracefix.records import Diagnosis, FixSite, Traceback
    from tracefix.render import plain_lines

    entry = next(e for e in load_entries() if e.id == "inplace-modification")
    assert entry.fix_advice("optimizer-step-between")

    def how(kind):
        d = Diagnosis(entry_id=entry.id, title="t", confidence=1.0, traceback=Traceback(exc_type="RuntimeError",
                      message="m"), fix_sites=(FixSite(path="train.py", line=3, code="opt_d.step()", kind=kind),))
        return next(ln for ln in plain_lines(d, entry) if ln.startswith("  How to fix:"))

    assert "optimizer step only after every backward()" in how("optimizer-step-between")
    assert "out-of-place" in how("inplace-augassign") and "optimizer step only after" not in how("inplace-augassign")
