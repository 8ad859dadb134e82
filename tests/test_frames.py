"""Frame classification and mapping of logged paths onto the project root."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracefix.frames import FileIndex, get_index, map_frame
from tracefix.paths import is_library_path, is_notebook_path, split_log_path
from tracefix.records import Frame


def write(root: Path, rel: str, text: str = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("path", [
    "/usr/lib/python3.11/runpy.py",
    "/usr/lib/python3/dist-packages/numpy/core/x.py",
    "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/_tensor.py",
    "/opt/conda/lib/python3.10/threading.py",
    "/opt/conda/envs/py39/lib/python3.9/site-packages/transformers/trainer.py",
    "/home/u/.venv/lib/python3.12/site-packages/lightning/pytorch/loops/fit_loop.py",
    "/usr/local/lib/python3.11/dist-packages/accelerate/accelerator.py",
    "<frozen runpy>",
    "<string>",
    r"C:\Users\me\AppData\Local\Programs\Python\Python311\Lib\runpy.py",
    r"C:\Python311\Lib\site-packages\torch\_tensor.py",
    r"C:\Users\me\anaconda3\envs\dl\Lib\site-packages\torch\autograd\__init__.py",
    "/home/u/pytorch/torch/autograd/__init__.py",            # a source build of torch
    "/Applications/PyCharm.app/Contents/plugins/python/helpers/pydev/pydevd.py",
    r"C:\Program Files\JetBrains\PyCharm\plugins\python\helpers\pydev\_pydev_bundle\_pydev_execfile.py",
    # tracefix run's own hook in a checkout or editable install (the verify re-run's outermost frame)
    "/home/dev/src/tracefix/tracefix/hooks/sitecustomize.py",
    r"C:\src\tracefix\tracefix\hooks\tracefix_witness.py",
    # ... and a family's recorder, which wraps Module.to (a crash inside .to() passes through it)
    "/home/dev/src/tracefix/tracefix/families/half_unscale/witness.py",
])
def test_library_paths(path):
    assert is_library_path(path)


@pytest.mark.parametrize("path", [
    "/home/u/proj/train.py",
    "/workspace/proj/models/net.py",
    "models/net.py",
    "train.py",
    r"C:\Users\me\proj\train.py",
    "/tmp/ipykernel_123/456.py",
    "<ipython-input-3-abc>",
    "Cell In[5]",
    "/home/u/myenv_proj/lib/utils.py",
    r"C:\proj\lib\x.py",
    "/home/u/torch_proj/train.py",
])
def test_user_paths(path):
    assert not is_library_path(path)


def test_notebook_paths():
    assert is_notebook_path("/tmp/ipykernel_123/456.py")
    assert is_notebook_path("<ipython-input-3-abc>")
    assert is_notebook_path("Cell In[5]")
    assert not is_notebook_path("/home/u/proj/train.py")


def test_split_log_path():
    assert split_log_path(r"C:\Users\me\proj\models\net.py") == ("Users", "me", "proj", "models", "net.py")
    assert split_log_path("../../etc/passwd") == ("etc", "passwd")
    assert split_log_path("./a//b.py") == ("a", "b.py")


def test_container_path_maps_by_suffix(tmp_path):
    write(tmp_path, "models/net.py")
    write(tmp_path, "train.py")
    m = map_frame(Frame("/workspace/proj/models/net.py", 1), tmp_path)
    assert m is not None
    assert m.rel_path == "models/net.py"
    assert m.local_path == (tmp_path / "models/net.py").resolve()
    assert not m.ambiguous and not m.changed and m.shift == 0


def test_windows_path_maps(tmp_path):
    write(tmp_path, "models/net.py")
    m = map_frame(Frame(r"C:\Users\me\proj\models\net.py", 1), tmp_path)
    assert m is not None and m.rel_path == "models/net.py"


def test_relative_path_maps(tmp_path):
    write(tmp_path, "pkg/train.py")
    m = map_frame(Frame("pkg/train.py", 1), tmp_path)
    assert m is not None and m.rel_path == "pkg/train.py"


def test_same_machine_absolute_path(tmp_path):
    p = write(tmp_path, "a/b.py")
    m = map_frame(Frame(str(p), 1), tmp_path)
    assert m is not None and m.rel_path == "a/b.py"


def test_longest_suffix_wins(tmp_path):
    write(tmp_path, "a/utils.py")
    write(tmp_path, "b/models/utils.py")
    m = map_frame(Frame("/srv/job/models/utils.py", 1), tmp_path)
    assert m is not None and m.rel_path == "b/models/utils.py" and not m.ambiguous


def test_ambiguous_basename_is_flagged(tmp_path):
    write(tmp_path, "pkg_a/utils.py")
    write(tmp_path, "pkg_b/utils.py")
    m = map_frame(Frame("/app/src/utils.py", 1, "<module>", "x = 1"), tmp_path)
    assert m is not None
    assert {m.rel_path, *m.ambiguous} == {"pkg_a/utils.py", "pkg_b/utils.py"}
    assert len(m.ambiguous) == 1


def test_ambiguous_basename_without_code_maps_to_nothing(tmp_path):
    write(tmp_path, "pkg_a/utils.py")
    write(tmp_path, "pkg_b/utils.py")
    assert map_frame(Frame("/app/src/utils.py", 1), tmp_path) is None


def test_only_the_file_that_reads_the_logged_code_maps(tmp_path):
    write(tmp_path, "exp1/train.py", "loss = f(x)\nloss.mean().backward()\n")
    write(tmp_path, "exp2/train.py", "loss = f(x)\nloss.backward()\n")
    m = map_frame(Frame("/cluster/u/exp/train.py", 2, "<module>", "loss.backward()"), tmp_path)
    assert m is not None and m.rel_path == "exp2/train.py" and not m.ambiguous and not m.changed


def test_root_level_file_beats_nested_same_name(tmp_path):
    write(tmp_path, "train.py")
    write(tmp_path, "scripts/train.py")
    m = map_frame(Frame("/workspace/proj/train.py", 1), tmp_path)
    assert m is not None and m.rel_path == "train.py" and not m.ambiguous


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", r"C:\Windows\System32\drivers\etc\hosts"])
def test_paths_outside_root_map_to_nothing(tmp_path, path):
    write(tmp_path, "train.py")
    assert map_frame(Frame(path, 1), tmp_path) is None


def test_same_suffix_inside_root_is_used(tmp_path):
    write(tmp_path, "etc/passwd", "fake\n")
    m = map_frame(Frame("../../etc/passwd", 1), tmp_path)
    assert m is not None and m.rel_path == "etc/passwd"


def test_symlink_out_of_root_is_read_through_the_link(tmp_path):
    # the user put the link in the project: it is read for the diagnosis (writing through it is refused)
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "secret.py")
    root = tmp_path / "root"
    root.mkdir()
    try:
        os.symlink(outside / "secret.py", root / "secret.py")
    except (OSError, NotImplementedError):
        pytest.skip("symlinks unavailable")
    for logged in ("/x/secret.py", str(root / "secret.py")):
        m = map_frame(Frame(logged, 1, code="x = 1"), root)
        assert m is not None and m.rel_path == "secret.py" and m.line == 1, logged
        assert m.local_path == root.resolve() / "secret.py"          # the link, under the root
    (outside / "other.py").write_text("x = 1\n")                     # not linked: never reached
    assert map_frame(Frame(str(outside / "other.py"), 1, code="x = 1"), root) is None
    assert map_frame(Frame(str(root / ".." / "outside" / "other.py"), 1, code="x = 1"), root) is None


def test_library_and_notebook_frames_do_not_map(tmp_path):
    write(tmp_path, "_tensor.py")
    write(tmp_path, "456.py")
    assert map_frame(Frame("/usr/lib/python3.11/site-packages/torch/_tensor.py", 1), tmp_path) is None
    assert map_frame(Frame("/tmp/ipykernel_123/456.py", 1), tmp_path) is None
    assert map_frame(Frame("<ipython-input-3-abc>", 1), tmp_path) is None


def test_missing_file(tmp_path):
    write(tmp_path, "train.py")
    assert map_frame(Frame("/workspace/other.py", 3), tmp_path) is None


def test_reanchor_after_inserted_lines(tmp_path):
    body = ["import torch", "", "def main():", "    loss = f()", "    loss.backward()", ""]
    p = write(tmp_path, "train.py", "\n".join(["# new comment"] * 3 + body))
    m = map_frame(Frame(str(p), 5, "main", "loss.backward()"), tmp_path)    # this file, edited since
    assert m is not None
    assert m.line == 8 and m.shift == 3 and not m.changed


def test_file_found_by_suffix_must_read_the_code_at_that_very_line(tmp_path):
    body = ["import torch", "", "def main():", "    loss = f()", "    loss.backward()", ""]
    write(tmp_path, "train.py", "\n".join(["# new comment"] * 3 + body))
    assert map_frame(Frame("/w/train.py", 5, "main", "loss.backward()"), tmp_path) is None
    assert map_frame(Frame("/w/train.py", 8, "main", "loss.backward()"), tmp_path).line == 8


def test_file_found_by_suffix_must_have_the_line_in_the_named_function(tmp_path):
    write(tmp_path, "train.py", "def step():\n    loss.backward()\n\nloss.backward()\n")
    assert map_frame(Frame("/w/train.py", 2, "step", "loss.backward()"), tmp_path).line == 2
    assert map_frame(Frame("/w/train.py", 2, "<module>", "loss.backward()"), tmp_path) is None
    assert map_frame(Frame("/w/train.py", 4, "<module>", "loss.backward()"), tmp_path).line == 4
    assert map_frame(Frame("/w/train.py", 4, "step", "loss.backward()"), tmp_path) is None


def test_whitespace_insensitive_code_compare(tmp_path):
    write(tmp_path, "train.py", "a = 1\nloss  .backward( )\n")
    m = map_frame(Frame("/w/train.py", 2, "<module>", "loss.backward()"), tmp_path)
    assert m is not None and m.line == 2 and m.shift == 0 and not m.changed


def test_file_found_by_suffix_that_reads_other_code_does_not_map(tmp_path):
    write(tmp_path, "train.py", "a = 1\nb = 2\n")
    assert map_frame(Frame("/w/train.py", 2, "<module>", "loss.backward()"), tmp_path) is None


def test_same_path_edited_since_is_flagged(tmp_path):
    p = write(tmp_path, "train.py", "a = 1\nb = 2\n")
    m = map_frame(Frame(str(p), 2, "<module>", "loss.backward()"), tmp_path)
    assert m is not None and m.changed and m.line == 2


def test_index_skips_virtualenvs_and_caches(tmp_path):
    write(tmp_path, "train.py")
    write(tmp_path, ".venv/lib/python3.11/site-packages/pkg/train.py")
    write(tmp_path, "node_modules/x/train.py")
    write(tmp_path, ".git/hooks/train.py")
    idx = FileIndex(tmp_path)
    assert idx.py_files() == ["train.py"]
    assert get_index(tmp_path) is get_index(tmp_path)


def test_index_skips_any_virtualenv_build_output_and_vendored_code(tmp_path):
    write(tmp_path, "train.py")
    write(tmp_path, "myenv/pyvenv.cfg", "home = /usr/bin\n")
    write(tmp_path, "myenv/lib/python3.11/site-packages/x.py")
    for d in ("build/lib/pkg", "dist", "vendor/thing", "third_party/lib"):
        write(tmp_path, f"{d}/mod.py")
    write(tmp_path, "src/builder.py")
    assert sorted(FileIndex(tmp_path).py_files()) == ["src/builder.py", "train.py"]


def test_index_is_bounded(tmp_path):
    for i in range(30):
        write(tmp_path, f"f{i:02d}.py")
    idx = FileIndex(tmp_path, max_files=10)
    assert idx.truncated and len(idx.files) == 10


def test_directory_named_like_py_and_weird_paths(tmp_path):
    (tmp_path / "weird.py").mkdir()
    assert map_frame(Frame("/w/weird.py", 1), tmp_path) is None
    assert map_frame(Frame("", 0), tmp_path) is None
    assert map_frame(Frame("/w/a\x00b.py", 1), tmp_path) is None
