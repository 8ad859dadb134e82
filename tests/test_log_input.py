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
