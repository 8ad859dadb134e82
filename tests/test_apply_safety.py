"""apply()/undo(): every safety rule has a test here."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import tracefix.patcher.writing as apply_mod
from tracefix.patcher import PatchError, apply, propose, undo
from tracefix.records import Diagnosis, FixSite, Patch, Traceback

SRC = "import torch\n\nloss = f()\nloss.backward()\n"
NEW = "import torch\n\nloss = f()\nloss.mean().backward()\n"


def make_patch(*files) -> Patch:
    return Patch(summary="s", applicability="safe", reason="", diff="", files=tuple(files))


def project(tmp_path: Path, text=SRC, name="train.py") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def proposed(tmp_path: Path, line=4, kind="backward-receiver", name="train.py") -> Patch:
    d = Diagnosis("e", "t", 1.0, Traceback("RuntimeError", "m"),
                  fix_sites=(FixSite(path=name, line=line, code="", kind=kind, score=1.0),))
    return propose(d, tmp_path)[0]


def leftovers(folder: Path):
    return [p.name for p in folder.iterdir() if p.name.endswith(".tracefix-tmp")]


# -- writing, backups, undo ---------------------------------------------------------------------------
def test_apply_writes_backs_up_and_records(tmp_path):
    p = project(tmp_path)
    assert apply(proposed(tmp_path), tmp_path) == ["train.py"]
    assert p.read_text() == NEW
    manifest = json.loads((tmp_path / ".tracefix" / "last-apply.json").read_text())
    entry = manifest["files"][0]
    assert entry["path"] == "train.py" and entry["sha256_after"] and entry["backup"].startswith(".tracefix/backup/")
    assert (tmp_path / entry["backup"]).read_text() == SRC
    assert leftovers(tmp_path) == []


def test_apply_twice_changes_nothing(tmp_path):
    p = project(tmp_path)
    patch = proposed(tmp_path)
    apply(patch, tmp_path)
    before = p.read_bytes()
    manifest = (tmp_path / ".tracefix" / "last-apply.json").read_bytes()
    assert apply(patch, tmp_path) == []
    assert p.read_bytes() == before
    assert (tmp_path / ".tracefix" / "last-apply.json").read_bytes() == manifest


def test_undo_restores_byte_for_byte_then_nothing_to_undo(tmp_path):
    data = b"\xef\xbb\xbfimport torch\r\n\r\nloss = f()\r\nloss.backward()"
    p = project(tmp_path, data)
    apply(proposed(tmp_path), tmp_path)
    assert p.read_bytes() != data
    assert undo(tmp_path) == ["train.py"]
    assert p.read_bytes() == data
    assert not (tmp_path / ".tracefix" / "last-apply.json").exists()
    assert undo(tmp_path) == []


def test_undo_refuses_when_changed_since_unless_forced(tmp_path):
    p = project(tmp_path)
    apply(proposed(tmp_path), tmp_path)
    p.write_text(NEW + "# my edit\n")
    with pytest.raises(PatchError, match="changed since"):
        undo(tmp_path)
    assert p.read_text() == NEW + "# my edit\n"
    assert undo(tmp_path, force=True) == ["train.py"]
    assert p.read_text() == SRC


def test_undo_with_nothing_applied(tmp_path):
    assert undo(tmp_path) == []


# -- where it may write -------------------------------------------------------------------------------
@pytest.mark.parametrize("rel", ["../outside.py", "sub/../../outside.py", "/etc/passwd", "C:/x.py", "C:\\x.py"])
def test_rejects_paths_leaving_root(tmp_path, rel):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.py").write_text("x = 1\n")
    with pytest.raises(PatchError, match="refusing"):
        apply(make_patch((rel, "x = 1\n", "x = 2\n")), root)
    assert (tmp_path / "outside.py").read_text() == "x = 1\n"


def test_rejects_symlink_leaving_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "secret.py"
    outside.write_text("x = 1\n")
    (root / "link.py").symlink_to(outside)
    with pytest.raises(PatchError, match="outside the project root"):
        apply(make_patch(("link.py", "x = 1\n", "x = 2\n")), root)
    (root / "dirlink").symlink_to(tmp_path)
    with pytest.raises(PatchError, match="outside the project root"):
        apply(make_patch(("dirlink/secret.py", "x = 1\n", "x = 2\n")), root)
    assert outside.read_text() == "x = 1\n"


def test_symlink_inside_root_writes_the_target_and_keeps_the_link(tmp_path):
    real = project(tmp_path, name="real.py")
    (tmp_path / "train.py").symlink_to(real)
    apply(make_patch(("train.py", SRC, NEW)), tmp_path)
    assert (tmp_path / "train.py").is_symlink() and real.read_text() == NEW


@pytest.mark.parametrize("rel", ["venv/lib/python3.11/site-packages/torch/x.py", "lib/dist-packages/y.py",
                                 ".tracefix/last-apply.json"])
def test_rejects_installed_packages_even_inside_root(tmp_path, rel):
    p = project(tmp_path, "x = 1\n", name=rel)
    with pytest.raises(PatchError, match="refusing"):
        apply(make_patch((rel, "x = 1\n", "x = 2\n")), tmp_path)
    assert p.read_text() == "x = 1\n"


def test_rejects_symlink_into_site_packages_inside_root(tmp_path):
    p = project(tmp_path, "x = 1\n", name="venv/site-packages/m.py")
    (tmp_path / "m.py").symlink_to(p)
    with pytest.raises(PatchError, match="installed package"):
        apply(make_patch(("m.py", "x = 1\n", "x = 2\n")), tmp_path)


# -- staleness ---------------------------------------------------------------------------------------------
def test_refuses_when_file_edited_since_the_patch(tmp_path):
    p = project(tmp_path)
    patch = proposed(tmp_path)
    p.write_text(SRC.replace("loss = f()", "loss = g()"))
    with pytest.raises(PatchError, match=r"train\.py:3 no longer reads 'loss = f\(\)'"):
        apply(patch, tmp_path)
    assert "g()" in p.read_text()
    assert not (tmp_path / ".tracefix").exists()


def test_expect_checks_the_traceback_line(tmp_path):
    project(tmp_path)
    patch = proposed(tmp_path)
    with pytest.raises(PatchError, match=r"^train\.py:4 no longer reads 'loss\.sum\(\)\.backward\(\)' \(edited since the log\?\)$"):
        apply(patch, tmp_path, expect={"train.py:4": "loss.sum().backward()"})
    with pytest.raises(PatchError, match="no longer has a line"):
        apply(patch, tmp_path, expect={"train.py": "nothing like this"})
    assert apply(patch, tmp_path, expect={"train.py:4": "  loss.backward()  ", "other.py:1": "x"}) == ["train.py"]


def test_missing_file(tmp_path):
    with pytest.raises(PatchError, match="does not exist"):
        apply(make_patch(("gone.py", "x = 1\n", "x = 2\n")), tmp_path)


def test_missing_root(tmp_path):
    with pytest.raises(PatchError, match="does not exist"):
        apply(make_patch(("a.py", "x = 1\n", "x = 2\n")), tmp_path / "nope")


# -- what it writes ----------------------------------------------------------------------------------------
def test_patched_text_must_compile(tmp_path):
    p = project(tmp_path, "x = 1\n")
    with pytest.raises(PatchError, match="does not compile"):
        apply(make_patch(("train.py", "x = 1\n", "x = (\n")), tmp_path)
    assert p.read_text() == "x = 1\n"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_long_file_must_compile_where_the_patch_touched_it(tmp_path, newline):
    """In a long file only the statements around the edit are compiled (text.compile_error): an
    edit that breaks its function is still refused, whatever the file's line endings."""
    funcs = [f"def f{i}(x):{newline}    y = x + {i}{newline}    return y{newline}{newline}" for i in range(900)]
    text = "import os" + newline + newline + "".join(funcs)
    assert len(text) > 20_000
    p = project(tmp_path, text.encode())
    broken = text.replace("    y = x + 450" + newline, "    y = (x + 450" + newline)
    with pytest.raises(PatchError, match="does not compile"):
        apply(make_patch(("train.py", text, broken)), tmp_path)
    assert p.read_bytes() == text.encode()
    fixed = text.replace("    y = x + 450" + newline, "    y = (x + 450)" + newline)
    assert apply(make_patch(("train.py", text, fixed)), tmp_path) == ["train.py"]
    assert p.read_bytes() == fixed.encode()


def test_keeps_bom_crlf_and_missing_trailing_newline(tmp_path):
    data = b"\xef\xbb\xbfimport torch\r\n\r\nloss = f()\r\nloss.backward()"
    p = project(tmp_path, data)
    apply(proposed(tmp_path), tmp_path)
    assert p.read_bytes() == b"\xef\xbb\xbfimport torch\r\n\r\nloss = f()\r\nloss.mean().backward()"


def test_keeps_coding_cookie_encoding(tmp_path):
    text = "# -*- coding: latin-1 -*-\ns = 'naïve'\nloss.backward()\n"
    p = project(tmp_path, text.encode("latin-1"))
    apply(proposed(tmp_path, line=3), tmp_path)
    assert p.read_bytes() == text.replace("loss.backward", "loss.mean().backward").encode("latin-1")


def test_unencodable_text_is_refused(tmp_path):
    p = project(tmp_path, "# -*- coding: latin-1 -*-\nx = 1\n".encode("latin-1"))
    with pytest.raises(PatchError, match="cannot be written as"):
        apply(make_patch(("train.py", "# -*- coding: latin-1 -*-\nx = 1\n", "# -*- coding: latin-1 -*-\nx = '€'\n")),
              tmp_path)
    assert p.read_bytes() == "# -*- coding: latin-1 -*-\nx = 1\n".encode("latin-1")


def test_keeps_permissions(tmp_path):
    p = project(tmp_path)
    os.chmod(p, 0o751)
    apply(proposed(tmp_path), tmp_path)
    assert stat.S_IMODE(p.stat().st_mode) == 0o751
    undo(tmp_path)
    assert stat.S_IMODE(p.stat().st_mode) == 0o751


def test_atomic_write_failure_leaves_file_and_no_temp(tmp_path, monkeypatch):
    p = project(tmp_path)
    patch = proposed(tmp_path)

    def boom(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(apply_mod.os, "replace", boom)
    with pytest.raises(PatchError, match="No space left"):
        apply(patch, tmp_path)
    assert p.read_text() == SRC
    assert leftovers(tmp_path) == []
    assert not (tmp_path / ".tracefix" / "last-apply.json").exists()


# -- permissions ---------------------------------------------------------------------------------------------
def test_read_only_file(tmp_path):
    p = project(tmp_path)
    patch = proposed(tmp_path)
    os.chmod(p, 0o444)
    try:
        with pytest.raises(PatchError, match="read-only"):
            apply(patch, tmp_path)
        assert p.read_text() == SRC
    finally:
        os.chmod(p, 0o644)


def test_read_only_folder(tmp_path):
    p = project(tmp_path, name="src/train.py")
    patch = proposed(tmp_path, name="src/train.py")
    os.chmod(p.parent, 0o555)
    try:
        with pytest.raises(PatchError, match="read-only"):
            apply(patch, tmp_path)
    finally:
        os.chmod(p.parent, 0o755)
    assert p.read_text() == SRC


def test_unreadable_file(tmp_path, monkeypatch):
    project(tmp_path)
    patch = proposed(tmp_path)

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(apply_mod, "open", denied, raising=False)
    with pytest.raises(PatchError, match="cannot read train.py: permission denied"):
        apply(patch, tmp_path)


# -- two files: all checked before any is written, rolled back together ------------------------------------------
def test_two_files_second_stale_writes_nothing(tmp_path):
    a = project(tmp_path, "x = 1\n", name="a.py")
    b = project(tmp_path, "y = 1\n", name="b.py")
    patch = make_patch(("a.py", "x = 1\n", "x = 2\n"), ("b.py", "y = 0\n", "y = 2\n"))
    with pytest.raises(PatchError, match=r"b\.py:1 no longer reads 'y = 0'"):
        apply(patch, tmp_path)
    assert a.read_text() == "x = 1\n" and b.read_text() == "y = 1\n"


def test_two_files_second_write_fails_rolls_back_first(tmp_path, monkeypatch):
    a = project(tmp_path, "x = 1\n", name="a.py")
    b = project(tmp_path, "y = 1\n", name="b.py")
    real = apply_mod._atomic_write
    calls = []

    def flaky(path, data, mode):
        calls.append(path.name)
        if path.name == "b.py" and len(calls) == 2:
            raise OSError(5, "Input/output error")
        return real(path, data, mode)
    monkeypatch.setattr(apply_mod, "_atomic_write", flaky)
    with pytest.raises(PatchError, match="cannot write b.py"):
        apply(make_patch(("a.py", "x = 1\n", "x = 2\n"), ("b.py", "y = 1\n", "y = 2\n")), tmp_path)
    assert a.read_text() == "x = 1\n" and b.read_text() == "y = 1\n"
    assert not (tmp_path / ".tracefix" / "last-apply.json").exists()
    assert undo(tmp_path) == []


def test_two_files_apply_and_undo(tmp_path):
    a = project(tmp_path, "x = 1\n", name="a.py")
    b = project(tmp_path, "y = 1\n", name="pkg/b.py")
    assert apply(make_patch(("a.py", "x = 1\n", "x = 2\n"), ("pkg/b.py", "y = 1\n", "y = 2\n")), tmp_path) == \
        ["a.py", "pkg/b.py"]
    assert undo(tmp_path) == ["a.py", "pkg/b.py"]
    assert a.read_text() == "x = 1\n" and b.read_text() == "y = 1\n"


def test_empty_patch_is_refused(tmp_path):
    with pytest.raises(PatchError):
        apply(make_patch(), tmp_path)
