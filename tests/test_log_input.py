"""Log input as users paste it: quoted, numbered, followed by the program's own output, repeated."""
import io
import json
import textwrap

import pytest

from conftest import run_tracefix
from tracefix.knowledge import load_entries
from tracefix.pipeline import collect
from tracefix.reader import read_tracebacks

ENTRIES = load_entries()

TB = textwrap.dedent('''\
    Traceback (most recent call last):
      File "/home/u/proj/train.py", line 41, in <module>
        loss.backward()
      File "/home/u/.venv/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward
        torch.autograd.backward(
      File "/home/u/.venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 208, in _make_grads
        raise RuntimeError(
    RuntimeError: grad can be implicitly created only for scalar outputs
    ''')


def read(text, **kw):
    return list(read_tracebacks(io.BytesIO(text.encode("utf-8")), **kw))


def parsed(text, **kw):
    return [(t.exc_type, t.message, t.frames, t.rank) for t in read(text, **kw)]


# --- quoting ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mark", [">", "> ", "> > ", ">> ", ">>", "> >", " >  > "])
def test_any_run_of_quote_markers_is_read_like_the_plain_log(mark):
    quoted = "".join(mark + ln + "\n" for ln in TB.splitlines())
    assert parsed(quoted) == parsed(TB)
    assert read(quoted)[0].frames[0].code == "loss.backward()"


def test_quoted_fence_and_empty_quoted_lines():
    quoted = "".join("> " + ln + "\n" for ln in ["I get this:", "", "```", *TB.splitlines(), "```", "", "why?"])
    assert parsed(quoted.replace("> \n", ">\n")) == parsed(TB)


# --- line numbers in front ---------------------------------------------------------------------
NUMBERINGS = {
    "cat -n": lambda i: f"{i:6d}\t",
    "grep -n": lambda i: f"{i}:",
    "colon and space": lambda i: f"{i}: ",
    "pipe": lambda i: f"{i:4d} | ",
    "box": lambda i: f"{i:4d} \u2502 ",
}


@pytest.mark.parametrize("style", list(NUMBERINGS))
@pytest.mark.parametrize("first", [1, 95])        # numbers from the middle of a file, across widths
def test_a_numbered_paste_keeps_its_frames_and_loses_the_numbers(style, first):
    number = NUMBERINGS[style]
    lines = ["step 0 loss 0.52", *TB.splitlines(), "", "done"]
    text = "".join(number(first + i) + ln + "\n" for i, ln in enumerate(lines))
    assert parsed(text) == parsed(TB)
    for size in (7, 60, 333):                      # wherever the chunks are cut
        assert [(t.exc_type, t.message, t.frames, t.line_no) for t in read(text, chunk_size=size)] == \
            [(t.exc_type, t.message, t.frames, t.line_no) for t in read(text)]


def test_a_lone_number_and_rank_labels_are_kept():
    assert [t.message for t in read("3: ValueError: bad row\n")] == ["bad row"]   # "3:" reads as rank 3
    assert read("3: ValueError: bad row\n")[0].rank == 3
    lone = "epoch 1\n  12 | RuntimeError: grad can be implicitly created only for scalar outputs\n\nepoch 2\n"
    assert [t.message for t in read(lone, bare=lambda s: "implicitly" in s)] == \
        ["12 | RuntimeError: grad can be implicitly created only for scalar outputs"]
    # srun --label: every line of a task carries the same number, two tasks interleaved
    a, b = ([f"{r}: {ln}" for ln in TB.splitlines()] for r in (0, 1))
    tbs = read("\n".join(x for pair in zip(a, b) for x in pair) + "\n")
    assert sorted(t.rank for t in tbs) == [0, 1] and all(len(t.frames) == 3 for t in tbs)


# --- what the program prints after an exception ------------------------------------------------
VALUE = textwrap.dedent('''\
    Traceback (most recent call last):
      File "/data/loader.py", line 3, in load
        x = parse(row)
    ValueError: could not convert string to float: 'row'
    ''')


@pytest.mark.parametrize("tail", ["step 1\n", "step 1\nepoch done\n", "epoch 3 loss 0.52\n", "loss: 0.5012\n",
                                  "iter=100\nTraceback (most recent call last):\n"])
@pytest.mark.parametrize("log", [TB, VALUE], ids=["known", "unknown"])
def test_the_programs_next_output_is_not_part_of_the_message(log, tail):
    first = read(log)[0].message
    assert read(log + tail)[0].message == first


CUDA = ("RuntimeError: CUDA error: device-side assert triggered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
STATE_DICT = ("RuntimeError: Error(s) in loading state_dict for Net:\n"
              '\tMissing key(s) in state_dict: "fc.weight", "fc.bias".\n'
              '\tUnexpected key(s) in state_dict: "head.weight".\n')
JIT = "RuntimeError:\nExpected a default value of type Tensor on parameter \"x\".\n"


@pytest.mark.parametrize("message", [CUDA, STATE_DICT, JIT], ids=["cuda", "state_dict", "jit"])
def test_real_multiline_messages_are_kept(message):
    text = TB.replace("RuntimeError: grad can be implicitly created only for scalar outputs\n", message)
    want = "\n".join(ln.strip() for ln in message.split(":", 1)[1].strip().split("\n"))
    assert read(text + "step 1\n")[0].message == want


def report(text):
    return collect(io.BytesIO(text.encode("utf-8")), ENTRIES)


def test_a_line_the_reader_keeps_does_not_split_or_change_the_diagnosis():
    """Whatever follows a message whose first line is the whole error is not the error's: the same
    traceback followed by two different lines is one diagnosis, shown with its one line."""
    r = report(TB + "Saving checkpoint to ckpt-1.pt\n" + TB + "Saving checkpoint to ckpt-2.pt\n")
    assert [(d.entry_id, d.traceback.message) for d in r.diagnoses] == \
        [("nonscalar-backward", "grad can be implicitly created only for scalar outputs")]
    r = report(VALUE + "Saving checkpoint to ckpt-1.pt\n" + VALUE + "Saving checkpoint to ckpt-2.pt\n")
    assert [(t, m.split("\n")[0]) for t, m in r.unrecognized] == [("ValueError", "could not convert string to float: 'row'")]


def test_a_continuation_that_carries_fields_stays_in_the_message():
    wrapped = TB.replace("scalar outputs\n", "real scalar outputs but got\ntorch.complex64\n")
    (d,) = report(wrapped).diagnoses
    assert d.field("dtype") == "torch.complex64"
    assert d.traceback.message == "grad can be implicitly created only for real scalar outputs but got\ntorch.complex64"


def test_cli_two_tracebacks_each_followed_by_a_step_line(tmp_path):
    log = tmp_path / "two.log"
    log.write_text("step 0\n" + TB + "step 1\n" + TB + "step 2\n")
    out = json.loads(run_tracefix("--no-patch", "--format", "json", "--root", tmp_path, log).stdout)
    assert [d["exception"]["message"] for d in out["diagnoses"]] == ["grad can be implicitly created only for scalar outputs"]
    log.write_text(VALUE + "step 1\nepoch done\n")
    lines = run_tracefix("--no-patch", "--format", "plain", "--root", tmp_path, log).stdout.decode().splitlines()
    assert "unrecognized: ValueError: could not convert string to float: 'row'" in lines


# --- the same traceback many times, and more errors than are listed ------------------------------
def test_identical_tracebacks_collapse_into_one_diagnosis_with_a_count():
    (d,) = report((TB + "step 1\n") * 1000).diagnoses
    assert d.notes[0] == "seen 1000 times in the log (identical tracebacks are shown once)"
    per_rank = report("".join(f"[rank{r}]: {ln}\n" for r in (0, 1) for ln in TB.splitlines()))
    (d,) = per_rank.diagnoses
    assert d.ranks == (0, 1) and not d.notes          # once per rank: the ranks line says it


def test_a_cut_list_says_how_many_more(tmp_path):
    known = "".join(TB.replace("line 41", f"line {i}") for i in range(1, 61))       # 60 distinct errors
    unknown = "".join(VALUE.replace("'row'", f"'row{i}'") for i in range(60))
    log = tmp_path / "many.log"
    log.write_text(known + unknown + known)
    args = ("--no-patch", "--root", tmp_path, log)
    out = json.loads(run_tracefix("--format", "json", *args).stdout)
    assert (len(out["diagnoses"]), len(out["unrecognized"])) == (50, 50)
    assert out["omitted"] == {"diagnoses": 10, "unrecognized": 10}
    for fmt in ("plain", "rich"):
        text = run_tracefix("--format", fmt, *args).stdout.decode()
        assert "and 10 more diagnoses" in text and "unrecognized: and 10 more" in text
    log.write_text(TB)
    assert json.loads(run_tracefix("--format", "json", *args).stdout)["omitted"] == {"diagnoses": 0, "unrecognized": 0}
    lines = run_tracefix("--format", "plain", *args).stdout.decode().splitlines()
    assert not any(ln.startswith(("and ", "unrecognized: and ")) for ln in lines)
