"""Reader: every log layout the issue names, parsed from hand-typed text (extra to the real samples)."""
import io
import textwrap

import pytest

from tracefix.reader import read_tracebacks, split_prefix, clean_line

PY311 = textwrap.dedent('''\
    Traceback (most recent call last):
      File "/home/u/proj/train.py", line 41, in <module>
        loss.backward()
      File "/home/u/.venv/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward
        torch.autograd.backward(
      File "/home/u/.venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 388, in backward
        grad_tensors_ = _make_grads(tensors, grad_tensors_, is_grads_batched=False)
                        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
      File "/home/u/.venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 208, in _make_grads
        raise RuntimeError(
    RuntimeError: grad can be implicitly created only for scalar outputs
    ''')


def read(text, **kw):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return list(read_tracebacks(io.BytesIO(data), **kw))


def only(text, **kw):
    tbs = read(text, **kw)
    assert len(tbs) == 1, tbs
    return tbs[0]


def test_plain_python311_traceback():
    tb = only(PY311)
    assert tb.exc_type == "RuntimeError"
    assert tb.message == "grad can be implicitly created only for scalar outputs"
    assert [f.line for f in tb.frames] == [41, 623, 388, 208]
    assert tb.frames[0].code == "loss.backward()"
    assert tb.frames[2].code.startswith("grad_tensors_ = _make_grads(")  # caret line skipped
    assert tb.has_header


def test_surrounding_noise_ansi_tqdm_crlf():
    noisy = ("\x1b[32mEpoch 1\x1b[0m:  10%|#  | 1/10\rEpoch 1:  20%|## | 2/10\r"
             + PY311.replace("\n", "\r\n").replace("RuntimeError:", "\x1b[31mRuntimeError\x1b[0m:"))
    tb = only(noisy)
    assert tb.exc_type == "RuntimeError"
    assert tb.message == "grad can be implicitly created only for scalar outputs"
    assert tb.frames[0].path == "/home/u/proj/train.py"



@pytest.mark.parametrize("tail", ["wandb: Waiting for W&B process to finish... (failed 1).\nwandb: Synced 5 W&B file(s)\n",
                                  "Exception ignored in: <function _releaseLock at 0x7f0>\n",
                                  "WARNING:root:training stopped early\n", "srun: error: node12: task 0: Exited\n",
                                  "Epoch 1:  10%|#  | 1/10\rEpoch 1:  20%|## | 2/10\n"])
def test_what_tools_print_after_the_traceback_is_not_part_of_the_message(tail):
    tb = only(PY311 + tail)
    assert tb.message == "grad can be implicitly created only for scalar outputs"


def test_a_message_continued_on_its_next_lines_is_kept():
    tb = only(PY311.replace("scalar outputs\n", "scalar outputs\n  see the docs for details\n"))
    assert tb.message == "grad can be implicitly created only for scalar outputs\nsee the docs for details"

@pytest.mark.parametrize("prefix,rank", [("[rank3]: ", 3), ("[rank3]:", 3), ("[default1]:", 1),
                                          ("[1,0]<stderr>:", 1), ("2024-05-01 12:00:00,123 - ERROR - ", None)])
def test_line_prefixes(prefix, rank):
    text = "".join(prefix + ln + "\n" for ln in PY311.splitlines())
    tb = only(text)
    assert tb.rank == rank
    assert tb.exc_type == "RuntimeError" and len(tb.frames) == 4
    assert tb.frames[0].code == "loss.backward()"


def test_interleaved_ranks_are_separated():
    a = ["[rank0]: " + ln for ln in PY311.splitlines()]
    b = ["[rank1]: " + ln for ln in PY311.splitlines()]
    mixed = [x for pair in zip(a, b) for x in pair]
    tbs = read("\n".join(mixed) + "\n")
    assert sorted(t.rank for t in tbs) == [0, 1]
    assert all(len(t.frames) == 4 and t.message.startswith("grad can") for t in tbs)


def test_windows_paths_with_spaces_and_non_ascii():
    text = textwrap.dedent('''\
        Traceback (most recent call last):
          File "C:\\Users\\Zoë\\My Projects\\llm tune\\train.py", line 12, in <module>
            loss.backward()
          File "C:\\Users\\Zoë\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages\\torch\\_tensor.py", line 522, in backward
            torch.autograd.backward(
        RuntimeError: grad can be implicitly created only for scalar outputs
        ''')
    tb = only(text)
    assert tb.frames[0].path == "C:\\Users\\Zoë\\My Projects\\llm tune\\train.py"
    assert tb.frames[0].line == 12


def test_chained_exceptions_mark_cause():
    text = PY311 + "\nDuring handling of the above exception, another exception occurred:\n\n" + textwrap.dedent('''\
        Traceback (most recent call last):
          File "/home/u/proj/train.py", line 50, in <module>
            torch.save(model, "out/model.pt")
        RuntimeError: Parent directory out does not exist.
        ''')
    first, second = read(text)
    assert first.cause_of_next and not second.cause_of_next
    assert first.message.startswith("grad can") and second.message.startswith("Parent directory")


def test_ipython8_cell_frames():
    text = textwrap.dedent('''\
        ---------------------------------------------------------------------------
        RuntimeError                              Traceback (most recent call last)
        Cell In[5], line 12
             10 out = model(x)
             11 loss = crit(out, y)
        ---> 12 loss.backward()

        File ~/venv/lib/python3.11/site-packages/torch/_tensor.py:623, in Tensor.backward(self, gradient, retain_graph, create_graph, inputs)
            621 if has_torch_function_unary(self):
        --> 623 torch.autograd.backward(

        RuntimeError: grad can be implicitly created only for scalar outputs
        ''')
    tb = only(text)
    assert tb.exc_type == "RuntimeError"
    assert tb.frames[0].path == "Cell In[5]" and tb.frames[0].line == 12
    assert tb.frames[0].code == "loss.backward()"
    assert tb.frames[1].line == 623


def test_old_ipython_input_frames():
    text = textwrap.dedent('''\
        RuntimeError                              Traceback (most recent call last)
        <ipython-input-3-8c2b3a1f> in <module>()
              5 loss = crit(out, y)
        ----> 6 loss.backward()

        /usr/local/lib/python3.7/dist-packages/torch/tensor.py in backward(self, gradient, retain_graph, create_graph)
            183         \"\"\"
        --> 184         torch.autograd.backward(self, gradient, retain_graph, create_graph)

        RuntimeError: grad can be implicitly created only for scalar outputs
        ''')
    tb = only(text)
    assert tb.frames[0].path == "<ipython-input-3-8c2b3a1f>" and tb.frames[0].line == 6
    assert tb.frames[1].line == 184
    assert tb.message.startswith("grad can")


def test_rich_boxed_traceback():
    text = textwrap.dedent('''\
        ╭───────────────────── Traceback (most recent call last) ─────────────────────╮
        │ /home/u/proj/train.py:41 in <module>                                         │
        │                                                                              │
        │   40 │   loss = crit(out, y)                                                 │
        │ ❱ 41 │   loss.backward()                                                     │
        │   42                                                                         │
        │                                                                              │
        │ /home/u/.venv/lib/python3.11/site-packages/torch/_tensor.py:623 in backward  │
        ╰──────────────────────────────────────────────────────────────────────────────╯
        RuntimeError: grad can be implicitly created only for scalar outputs
        ''')
    tb = only(text)
    assert tb.exc_type == "RuntimeError"
    assert tb.frames[0].path == "/home/u/proj/train.py" and tb.frames[0].line == 41
    assert tb.frames[0].code == "loss.backward()"


def test_pytest_output():
    text = textwrap.dedent('''\
        ____________________________ test_train_step ____________________________

            def test_train_step():
        >       loss.backward()

        tests/test_train.py:12:
        _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
        E   RuntimeError: grad can be implicitly created only for scalar outputs

        ../.venv/lib/python3.11/site-packages/torch/autograd/__init__.py:208: RuntimeError
        ''')
    tbs = read(text)
    assert any(t.exc_type == "RuntimeError" and t.message.startswith("grad can") for t in tbs)


def test_markdown_fenced_and_quoted_paste():
    text = "I get this:\n\n```python\n" + PY311 + "```\n\nany idea?\n"
    tb = only(text)
    assert len(tb.frames) == 4 and tb.exc_type == "RuntimeError"
    quoted = "".join("> " + ln + "\n" for ln in PY311.splitlines())
    assert only(quoted).frames[0].code == "loss.backward()"


def test_message_fenced_on_one_line():
    tb = only("```RuntimeError: grad can be implicitly created only for scalar outputs```\n")
    assert tb.exc_type == "RuntimeError" and tb.message == "grad can be implicitly created only for scalar outputs"
    tb = only("see ~~~ValueError: Attempting to unscale FP16 gradients.~~~\n".split("see ", 1)[1])
    assert tb.exc_type == "ValueError"
    assert read("```python\nx = 1\n```\n") == []      # an opening fence alone stays a fence


def test_indented_paste_keeps_structure():
    text = "".join("    " + ln + "\n" for ln in PY311.splitlines())
    tb = only(text)
    assert tb.exc_type == "RuntimeError" and len(tb.frames) == 4
    assert tb.frames[-1].code == "raise RuntimeError("


def test_flattened_to_one_line():
    flat = " ".join(ln.strip() for ln in PY311.splitlines() if not set(ln.strip()) <= {"^"})
    tb = only(flat + "\n")
    assert tb.exc_type == "RuntimeError"
    assert tb.message.startswith("grad can be implicitly created")
    assert tb.frames[0].path == "/home/u/proj/train.py" and tb.frames[0].line == 41
    assert tb.frames[0].code == "loss.backward()"


def test_hard_wrapped_message_is_joined():
    text = textwrap.dedent('''\
        Traceback (most recent call last):
          File "train.py", line 30, in <module>
            scaler.step(opt)
        NotImplementedError: "_amp_foreach_non_finite_check_and_unscale_cuda" not
        implemented for 'BFloat16'
        ''')
    tb = only(text)
    assert tb.exc_type == "NotImplementedError"
    assert " ".join(tb.message.split()) == "\"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'"


def test_mid_stack_paste_without_header():
    text = "\n".join(PY311.splitlines()[3:]) + "\n"
    tb = only(text)
    assert not tb.has_header
    assert tb.exc_type == "RuntimeError" and tb.frames[0].line == 623


def test_missing_final_exception_line():
    text = "\n".join(PY311.splitlines()[:-1]) + "\n"
    tb = only(text)
    assert tb.exc_type is None and len(tb.frames) == 4
    assert tb.frames[-1].code == "raise RuntimeError("


def test_bare_message_needs_the_predicate():
    line = "RuntimeError: grad can be implicitly created only for scalar outputs\n"
    tb = only(line)
    assert tb.exc_type == "RuntimeError" and not tb.frames
    prose = "after upgrading I get grad can be implicitly created only for scalar outputs, why?\n"
    assert read(prose) == []
    tb = only(prose, bare=lambda s: "implicitly created" in s)
    assert tb.exc_type is None and "implicitly created" in tb.message


ANOMALY = textwrap.dedent('''\
    /home/u/.venv/lib/python3.11/site-packages/torch/autograd/graph.py:979: UserWarning: Error detected in ReluBackward0. Traceback of forward call that caused the error:
      File "/home/u/proj/train.py", line 60, in <module>
        out = model(x)
      File "/home/u/proj/models.py", line 21, in forward
        h = torch.relu(self.fc1(x))
     (Triggered internally at /__w/pytorch/pytorch/torch/csrc/autograd/python_anomaly_mode.cpp:122.)
      return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
    Traceback (most recent call last):
      File "/home/u/proj/train.py", line 62, in <module>
        loss.backward()
    RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [8, 4]], which is output 0 of Relu, is at version 1; expected version 0 instead. Hint: the backtrace further above shows the operation that failed to compute its gradient. The variable in question was changed in there or anywhere later. Good luck!
    ''')


def test_anomaly_block_attaches_forward_trace():
    text = ANOMALY
    tb = only(text)
    assert tb.anomaly_node == "ReluBackward0"
    assert [(f.path.rsplit("/", 1)[-1], f.line) for f in tb.anomaly_frames] == [("train.py", 60), ("models.py", 21)]
    assert tb.anomaly_frames[-1].code == "h = torch.relu(self.fc1(x))"
    assert tb.frames[0].line == 62


# --- a big regular file is searched by offset: head, tail and a chunk around each header -------
FILLER = b"2024-05-01 12:00:01,500 - INFO - trainer - step 6 loss 0.29 grad_norm 1.2\n"
CH = 4096   # the chunk size these tests use, so that a few KB already make gaps


def read_file(tmp_path, data: bytes, **kw):
    log = tmp_path / "big.log"
    log.write_bytes(data)
    with open(log, "rb") as fh:
        return list(read_tracebacks(fh, chunk_size=CH, seek_min=0, **kw))


def pad(n_chunks: int) -> bytes:
    return FILLER * (n_chunks * CH // len(FILLER))


def test_file_search_keeps_the_anomaly_block_before_a_mid_file_traceback(tmp_path):
    tbs = read_file(tmp_path, pad(20) + ANOMALY.encode() + pad(20))
    assert len(tbs) == 1
    assert tbs[0].anomaly_node == "ReluBackward0" and len(tbs[0].anomaly_frames) == 2


def test_file_search_follows_a_traceback_longer_than_its_window(tmp_path):
    frames = "".join(f'  File "/p/m{i}.py", line {i + 1}, in f\n    g()\n' for i in range(2000))   # ~80 KB
    text = "Traceback (most recent call last):\n" + frames + "ValueError: deep\n"
    tbs = read_file(tmp_path, pad(20) + text.encode() + pad(20))
    assert [(t.exc_type, t.message, t.frames[-1].path) for t in tbs] == [("ValueError", "deep", "/p/m1999.py")]


def test_file_search_finds_bare_messages_at_both_ends_only(tmp_path):
    msg = b"RuntimeError: grad can be implicitly created only for scalar outputs\n\n"
    bare = lambda s: "implicitly created" in s   # noqa: E731
    tbs = read_file(tmp_path, msg + pad(20) + msg.replace(b"grad", b"GRAD") + pad(20) + msg, bare=bare)
    # The middle one has no traceback header: a GB log is not read line by line to find it.
    assert [t.message for t in tbs] == ["grad can be implicitly created only for scalar outputs"] * 2


def test_file_search_crlf_and_cr_at_window_edges(tmp_path):
    tb = PY311.replace("\n", "\r\n").encode()
    progress = b"".join(b"Epoch 1: %3d%%|#   |\r" % i for i in range(100)) + b"\r\n"
    data = (progress * 200 + tb) * 5 + progress * 100
    tbs = read_file(tmp_path, data)
    assert [t.message for t in tbs] == ["grad can be implicitly created only for scalar outputs"] * 5
    assert all(t.frames[0].code == "loss.backward()" for t in tbs)


def test_utf16_file_is_streamed_not_searched(tmp_path):
    text = "step\n" * 5000 + PY311
    data = "\ufeff".encode("utf-16-le") + text.replace("\n", "\r\n").encode("utf-16-le")
    tbs = read_file(tmp_path, data)
    assert [t.exc_type for t in tbs] == ["RuntimeError"]


def test_recursion_error_repeated_line():
    frames = '  File "/p/x.py", line 3, in f\n    return f()\n'
    text = "Traceback (most recent call last):\n" + frames * 3 + "  [Previous line repeated 996 more times]\n" + \
        "RecursionError: maximum recursion depth exceeded\n"
    tb = only(text)
    assert tb.exc_type == "RecursionError" and len(tb.frames) == 3


def test_huge_stack_is_bounded():
    frames = "".join(f'  File "/p/m{i}.py", line {i + 1}, in f\n    g()\n' for i in range(10000))
    tb = only("Traceback (most recent call last):\n" + frames + "ValueError: deep\n")
    assert tb.exc_type == "ValueError"
    assert len(tb.frames) <= 240
    assert tb.frames[-1].path == "/p/m9999.py"   # the innermost frames survive
    assert tb.frames[0].path == "/p/m0.py"


def test_utf16_powershell_log():
    data = "\ufeff".encode("utf-16-le") + PY311.replace("\n", "\r\n").encode("utf-16-le")
    tb = only(data)
    assert tb.exc_type == "RuntimeError" and tb.frames[0].code == "loss.backward()"


def test_non_utf8_bytes_and_nul():
    data = b"\xff\xfe\x00garbage\x00\x80\x81\n" + PY311.encode() + b"\x00\xc3\x28\n"
    tb = only(data)
    assert tb.message == "grad can be implicitly created only for scalar outputs"


def test_empty_input():
    assert read(b"") == []


def test_chunk_size_does_not_change_result():
    text = ("progress line\n" * 50 + PY311) * 3
    expect = read(text)
    for size in (7, 64, 1000, 4096):
        got = read(text, chunk_size=size)
        assert [(t.exc_type, t.message, t.frames) for t in got] == [(t.exc_type, t.message, t.frames) for t in expect]


def test_clean_line_strips_escapes():
    assert clean_line("\x1b]0;evil title\x07ok\x1b[2J\x1b[1;1H") == "ok"
    assert split_prefix("[rank12]: hello") == (12, "hello")


def test_log_record_after_the_message_is_not_part_of_it():
    text = PY311 + "2024-05-01 12:00:01,500 - INFO - trainer - step 6 loss 0.29 grad_norm 1.2\n"
    assert [t.message for t in read(text)] == ["grad can be implicitly created only for scalar outputs"]


def test_every_line_stamped_keeps_a_multiline_message():
    stamp = "2024-05-01T12:00:00.123Z "
    text = "".join(stamp + ln + "\n" for ln in [
        "Traceback (most recent call last):",
        '  File "/app/train.py", line 3, in <module>',
        "    raise ValueError('a')",
        "ValueError: first line of the message",
        "second line of the message",
    ])
    assert [t.message for t in read(text)] == ["first line of the message\nsecond line of the message"]


def test_a_caret_line_read_as_a_message_is_no_error():
    # what a quoted traceback cut right after a caret line leaves (accelerate's copy of a crash's tail)
    out = read(b"RuntimeError: ^^^^^^^^^^^^^^^^\n")
    assert out == []
    (tb,) = read(b"RuntimeError: ^ is not a valid operator here\n")    # a message that starts with one is one
    assert tb.message.startswith("^ is not")


def test_launcher_wrappers_are_not_errors_of_their_own():
    torchrun = (b"[rank0]: Traceback (most recent call last):\n"
                b'[rank0]:   File "/w/train.py", line 3, in <module>\n[rank0]:     loss.backward()\n'
                b"[rank0]: RuntimeError: grad can be implicitly created only for scalar outputs\n"
                b"Traceback (most recent call last):\n"
                b'  File "/venv/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent\n'
                b"    raise ChildFailedError(\n"
                b"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                b"============================================================\ntrain.py FAILED\n")
    assert [tb.rank for tb in read(torchrun)] == [0]
    # accelerate launch: CalledProcessError from a RuntimeError holding a copy of the script's output
    accelerate = (b"Traceback (most recent call last):\n"
                  b'  File "/w/train.py", line 3, in <module>\n    loss.backward()\n'
                  b"RuntimeError: grad can be implicitly created only for scalar outputs\n"
                  b"RuntimeError: ^^^^^^^^^^^^\n"
                  b'  File "/venv/site-packages/torch/autograd/__init__.py", line 208, in _make_grads\n'
                  b"    raise RuntimeError(\n"
                  b"RuntimeError: grad can be implicitly created only for scalar outputs\n\n\n"
                  b"The above exception was the direct cause of the following exception:\n\n"
                  b"Traceback (most recent call last):\n"
                  b'  File "/venv/site-packages/accelerate/commands/launch.py", line 1049, in _run_subprocess\n'
                  b"    raise subprocess.CalledProcessError(\n"
                  b"subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.\n")
    (tb,) = read(accelerate)
    assert tb.frames[-1].path == "/w/train.py"
    # a CalledProcessError of the user's own code stays an error
    own = accelerate.replace(b"accelerate/commands/launch.py", b"w/deploy.py")
    assert [t.exc_type for t in read(own)][-1] == "subprocess.CalledProcessError"


def test_an_exception_line_with_an_empty_message_is_still_an_error():
    (tb,) = read(b"Traceback (most recent call last):\n  File \"/w/a.py\", line 1, in <module>\n    f()\nKeyError\n")
    assert tb.exc_type == "KeyError"


@pytest.mark.parametrize("cut", ['File "/w/train.py", line 3, in <module>', "loss.backward()",
                                 'ine 3, in <module>', "^^^^^^^^^^^^",
                                 "RuntimeError: grad can be implicitly created only for scalar outputs"])
def test_a_copy_of_the_traceback_cut_anywhere_is_not_an_error_of_its_own(cut):
    # accelerate launch re-raises RuntimeError(<the tail of the script's stderr>): it may start anywhere
    log = (b"Traceback (most recent call last):\n"
           b'  File "/w/train.py", line 3, in <module>\n    loss.backward()\n'
           b"RuntimeError: grad can be implicitly created only for scalar outputs\n"
           b"step 3 loss 0.52\n"          # (output between them: the witness's block, say)
           + f"RuntimeError: {cut}\n".encode())
    (tb,) = read(log)
    assert tb.frames[-1].path == "/w/train.py"
    # a different error right after a traceback is still one
    other = read(log.replace(f"RuntimeError: {cut}".encode(), b"RuntimeError: CUDA out of memory"))
    assert [t.message for t in other][-1] == "CUDA out of memory"
