"""Knowledge entries: schema, and every entry's own examples replayed (thefuck/TorchFix style)."""
import io

import pytest

from tracefix.families import families
from tracefix.knowledge import KnowledgeError, load_entries
from tracefix.pipeline import collect
from tracefix.reader import FULL_SCAN

ENTRIES = load_entries(examples=True)
KNOWN = {entry_id for fam in families() for entry_id in fam.entries}


def diagnose_text(text):
    return collect(io.BytesIO(text.encode("utf-8")), ENTRIES)


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
def test_example_is_recognised(entry, example):
    report = diagnose_text(example.log)
    ids = [d.entry_id for d in report.diagnoses]
    assert ids and set(ids) == {entry.id}, (ids, report.unrecognized)
    got = dict(report.diagnoses[0].fields)
    for k, v in example.fields:
        assert got.get(k) == v, (k, got)


@pytest.mark.parametrize("entry,example", NEGATIVE, ids=[f"{e.id}:{x.name}" for e, x in NEGATIVE])
def test_counterexample_is_not_recognised(entry, example):
    report = diagnose_text(example.log)
    assert entry.id not in [d.entry_id for d in report.diagnoses]


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
