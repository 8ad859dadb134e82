"""Log input as users paste it: quoted, numbered, followed by the program's own output, repeated."""
import io
import textwrap

import pytest

from tracefix.reader import read_tracebacks

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
