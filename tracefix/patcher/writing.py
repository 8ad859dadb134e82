"""Write a patch safely, and undo the last one byte for byte.

Rules: never outside the root (no "..", absolute paths, symlinks leaving it, site-/dist-packages);
refuse when a file changed since the patch was made; check every file before writing any; write
atomically (temp file in the same folder + os.replace) keeping encoding, BOM, line endings and mode;
back the originals up under <root>/.tracefix/ and record them in last-apply.json.  The folder holds
a ``.gitignore`` of ``*`` (it never shows in ``git status``) and is removed once nothing is left in it.
All apply() calls of one ``session`` (one tracefix command) share one record: undo restores them all.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Dict, List, Optional

from tracefix.patcher.errors import PatchError
from tracefix.patcher.text import compile_error, decode_any, encode, first_difference, line_at, split_lines
from tracefix.record import record
from tracefix.records import Patch

STATE_DIR = ".tracefix"
MANIFEST = "last-apply.json"
JOURNAL = "applied.json"       # pipeline's record of applied tracebacks (a repeated --apply is a no-op)
GITIGNORE = ".gitignore"
_FORBIDDEN_PARTS = {"site-packages", "dist-packages"}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _root(root: Path) -> Path:
    try:
        resolved = Path(root).resolve(strict=True)
    except (OSError, RuntimeError):
        raise PatchError(f"the project root {root} does not exist") from None
    if not resolved.is_dir():
        raise PatchError(f"the project root {root} is not a directory")
    return resolved


def safe_path(root: Path, rel: str) -> Path:
    """The real file ``rel`` names under ``root``; PatchError when it would leave the root."""
    if not rel or "\x00" in rel:
        raise PatchError(f"refusing to write '{rel}': not a file path")
    if PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute() or PureWindowsPath(rel).drive:
        raise PatchError(f"refusing to write '{rel}': patch paths must be relative to the project root")
    parts = rel.replace("\\", "/").split("/")
    if ".." in parts:
        raise PatchError(f"refusing to write '{rel}': the path leaves the project root")
    if _FORBIDDEN_PARTS & set(parts) or STATE_DIR in parts:
        raise PatchError(f"refusing to write '{rel}': it is an installed package or tracefix's own state, "
                         "not your code")
    target = (root / rel)
    try:
        resolved = target.resolve(strict=False)
    except (OSError, RuntimeError):
        raise PatchError(f"refusing to write '{rel}': cannot resolve the path (symlink loop?)") from None
    try:
        inside = resolved.relative_to(root)
    except ValueError:
        # a relative path without ".." leaves the root only through a symlink: say so, that is the fix
        raise PatchError(f"refusing to write '{rel}': a symlink takes it outside the project root "
                         f"(to {resolved})") from None
    if _FORBIDDEN_PARTS & set(inside.parts):
        raise PatchError(f"refusing to write '{rel}': it resolves into an installed package ({resolved})")
    return resolved


def _read(path: Path, rel: str) -> bytes:
    if not path.exists():
        raise PatchError(f"cannot patch {rel}: the file does not exist")
    if not path.is_file():
        raise PatchError(f"cannot patch {rel}: it is not a regular file")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except PermissionError:
        raise PatchError(f"cannot read {rel}: permission denied") from None
    except OSError as exc:
        raise PatchError(f"cannot read {rel}: {exc.strerror or exc}") from None


def _check_writable(path: Path, rel: str) -> None:
    st = path.stat()
    if not os.access(path, os.W_OK) or not (st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)):
        raise PatchError(f"cannot write {rel}: the file is read-only")
    folder = path.parent
    dst = folder.stat()
    if not os.access(folder, os.W_OK | os.X_OK) or not (dst.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)):
        raise PatchError(f"cannot write {rel}: its folder {folder} is read-only (the patch is written through a "
                         "temporary file beside it)")


def _atomic_write(path: Path, data: bytes, mode: Optional[int]) -> None:
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tracefix-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@record
class _Planned:
    rel: str
    path: Path
    before: bytes
    after: bytes
    mode: int


def _check_expect(rel: str, current: str, expect: Dict[str, str]) -> None:
    for key, wanted in expect.items():
        path, _, line = key.rpartition(":")
        if not (path and line.isdigit()):
            path, line = key, ""
        if path.replace("\\", "/") != rel:
            continue
        wanted = wanted.strip()
        if line:
            got = line_at(current, int(line)).strip()
            if got != wanted:
                raise PatchError(f"{rel}:{line} no longer reads '{wanted}' (edited since the log?)")
        elif wanted not in {c.strip() for c, _ in split_lines(current)}:
            raise PatchError(f"{rel} no longer has a line reading '{wanted}' (edited since the log?)")


def state_dir(root: Path) -> Path:
    """``root/.tracefix``, created with a ``.gitignore`` of ``*`` so it never shows in ``git status``."""
    state = Path(root) / STATE_DIR
    if state.is_symlink() or (state.exists() and not state.is_dir()):
        raise PatchError(f"refusing to use {state}: it is not a plain folder")
    state.mkdir(exist_ok=True)
    ignore = state / GITIGNORE
    if not ignore.exists():
        ignore.write_text("# tracefix's backups and undo records; never committed\n*\n", encoding="utf-8")
    return state


def tidy_state(root: Path) -> None:
    """Remove emptied backup folders, and ``.tracefix`` itself when only its .gitignore is left."""
    state = Path(root) / STATE_DIR
    if not state.is_dir() or state.is_symlink():
        return
    backups = state / "backup"
    if backups.is_dir():
        for folder in sorted((p for p in backups.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            try:
                folder.rmdir()
            except OSError:
                pass   # not empty
        try:
            backups.rmdir()
        except OSError:
            pass
    try:
        if {p.name for p in state.iterdir()} <= {GITIGNORE}:
            shutil.rmtree(state)
    except OSError:
        pass


def apply(patch: Patch, root: Path, expect: Optional[Dict[str, str]] = None,
          session: Optional[str] = None) -> List[str]:
    """Write ``patch`` under ``root``; returns the relative paths written ([] when already applied).

    ``expect`` maps "rel/path.py:LINE" (or just "rel/path.py") to the stripped source line the
    traceback showed; the patch is refused when the file no longer reads so.  Calls with the same
    ``session`` add to one undo record (one `tracefix undo` reverts the whole command).
    """
    if patch.applicability == "insufficient":
        raise PatchError(f"refusing to write an insufficient patch: {patch.reason}")
    root = _root(root)
    if not patch.files:
        raise PatchError("this patch carries no file contents to write")
    plan: List[_Planned] = []
    for rel, original, new in patch.files:
        rel = rel.replace("\\", "/")
        path = safe_path(root, rel)
        data = _read(path, rel)
        decoded = decode_any(data, rel)
        if expect:
            _check_expect(rel, decoded.text, expect)
        if decoded.text == new:
            continue  # already applied: applying twice changes nothing
        if decoded.text != original:
            n = first_difference(original, decoded.text)
            was = line_at(original, n).strip()
            raise PatchError(f"{rel}:{n} no longer reads '{was}' (edited since the patch was made?)")
        failed = compile_error(original, new, rel)
        if failed is not None:
            raise PatchError(f"refusing to write {rel}: the patched text does not compile ({failed})")
        after = encode(new, decoded.encoding, decoded.bom, rel) if not rel.lower().endswith(".ipynb") \
            else _notebook_bytes(data, original, new, rel)
        _check_writable(path, rel)
        plan.append(_Planned(rel, path, data, after, stat.S_IMODE(path.stat().st_mode)))
    if not plan:
        return []

    backup_dir, manifest = _backup(root, plan)
    written: List[_Planned] = []
    try:
        for item in plan:
            _atomic_write(item.path, item.after, item.mode)
            written.append(item)
    except OSError as exc:
        failed = plan[len(written)].rel
        for item in reversed(written):
            try:
                _atomic_write(item.path, item.before, item.mode)
            except OSError:  # pragma: no cover - the backup still holds it
                pass
        shutil.rmtree(backup_dir, ignore_errors=True)
        raise PatchError(f"cannot write {failed}: {exc.strerror or exc}; nothing was changed") from None
    manifest["files"] = [{"path": p.rel, "backup": _posix(backup_dir.relative_to(root) / p.rel),
                          "sha256_before": _sha256(p.before), "sha256_after": _sha256(p.after)} for p in plan]
    manifest["summary"] = patch.summary
    if session is not None:
        manifest["session"] = session
        previous = _read_manifest(root / STATE_DIR / MANIFEST)
        if previous and previous.get("session") == session:
            manifest["files"] = list(previous.get("files", [])) + manifest["files"]
            manifest["summary"] = f"{previous.get('summary', '')}; {patch.summary}"
    try:
        _atomic_write(root / STATE_DIR / MANIFEST, json.dumps(manifest, indent=2).encode("utf-8"), None)
    except OSError as exc:  # pragma: no cover - the files are patched; say undo will not work
        raise PatchError(f"the patch was written but its undo record was not ({exc.strerror or exc})") from None
    return [p.rel for p in plan]


def hard_links(root: Path, rels) -> Dict[str, int]:
    """{rel: link count} of the files among ``rels`` that have more than one hard link.

    Asked before :func:`apply`: its atomic replace gives the path a new inode, so the other links
    keep the old text (and undo, atomic too, does not join them again); the caller says so."""
    out: Dict[str, int] = {}
    try:
        root = _root(root)
    except PatchError:
        return out
    for rel in (r.replace("\\", "/") for r in rels):     # as apply() names what it wrote
        try:
            n = safe_path(root, rel).stat().st_nlink
        except (OSError, PatchError):
            continue        # apply() itself says what is wrong with it
        if n > 1:
            out[rel] = n
    return out


def _notebook_bytes(data: bytes, original: str, new: str, rel: str) -> bytes:
    """The .ipynb with only the changed cells' sources replaced (layout kept byte for byte)."""
    from tracefix.notebook import LayoutError, write_back
    try:
        return write_back(data, original, new)
    except LayoutError as exc:
        raise PatchError(f"refusing to write {rel}: {exc}") from None


def _posix(path: Path) -> str:
    return "/".join(path.parts)


def _read_manifest(record: Path) -> Optional[dict]:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _backup(root: Path, plan: List[_Planned]):
    state = state_dir(root)
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
    backup_dir = state / "backup" / stamp
    try:
        for item in plan:
            dest = backup_dir / item.rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(item.before)
    except OSError as exc:
        shutil.rmtree(backup_dir, ignore_errors=True)
        raise PatchError(f"cannot back up the originals under {state}: {exc.strerror or exc}; nothing was changed") \
            from None
    return backup_dir, {"version": 1, "time": stamp, "files": []}


def undo(root: Path, force: bool = False) -> List[str]:
    """Restore the files of the last apply (every file of its session) byte for byte; [] when there
    is nothing to undo.  Every file is checked before any is written."""
    root = _root(root)
    record = root / STATE_DIR / MANIFEST
    if not record.is_file():
        return []
    try:
        manifest = json.loads(record.read_text(encoding="utf-8"))
        files = list(manifest["files"])
        for item in files:
            item["path"], item["backup"]  # noqa: B018  (a record without them is unreadable)
    except (OSError, ValueError, KeyError, TypeError):
        raise PatchError(f"cannot read the undo record {record}") from None
    # Newest first: a file patched twice in one session goes back through its intermediate text.
    current: Dict[str, Optional[bytes]] = {}
    final: Dict[str, tuple] = {}
    backups = []
    for item in reversed(files):
        rel = item["path"]
        path = safe_path(root, rel)
        backup = root / item["backup"]
        try:
            backup.resolve().relative_to((root / STATE_DIR).resolve())
            original = backup.read_bytes()
        except (OSError, ValueError):
            raise PatchError(f"cannot undo {rel}: its backup {item['backup']} is missing") from None
        backups.append(backup)
        if rel not in current:
            current[rel] = _read(path, rel) if path.exists() else None
        if current[rel] is not None:
            if _sha256(current[rel]) != item.get("sha256_after") and not force:
                raise PatchError(f"{rel} changed since tracefix patched it; refusing to undo (use --force to restore "
                                 "the backup anyway)")
        if rel not in final:
            if path.exists():
                _check_writable(path, rel)
                mode: Optional[int] = stat.S_IMODE(path.stat().st_mode)
            else:
                mode = None
            final[rel] = (path, mode)
        current[rel] = original
    restored = []
    for rel, (path, mode) in final.items():
        try:
            _atomic_write(path, current[rel], mode)
        except OSError as exc:
            raise PatchError(f"cannot restore {rel}: {exc.strerror or exc}") from None
        restored.append(rel)
    record.unlink()
    for backup in backups:
        try:
            backup.unlink()
        except OSError:
            pass
    _forget_applied(root, set(restored))
    tidy_state(root)
    return sorted(restored, key=[item["path"] for item in files].index)


def journal_files(entry) -> Dict[str, str]:
    """{relative path: sha256 after the patch} of one journal entry: ``{"patch": N, "summary": ...,
    "files": {...}}``, or, as older tracefix wrote it, the bare ``{path: sha256}``; {} when unreadable."""
    if not isinstance(entry, dict):
        return {}
    files = entry.get("files") if "files" in entry else entry
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return {}
    return files


def _forget_applied(root: Path, restored) -> None:
    """Drop the journal entries of the restored files: applying that log again must patch again."""
    path = root / STATE_DIR / JOURNAL
    journal = _read_manifest(path)
    if journal is None:
        return
    kept = {k: v for k, v in journal.items() if not restored & set(journal_files(v))}
    try:
        if kept:
            _atomic_write(path, json.dumps(kept, indent=1).encode("utf-8"), None)
        else:
            path.unlink()
    except OSError:
        pass
