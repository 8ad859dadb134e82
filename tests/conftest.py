"""Shared fixtures: the shipped samples, run once per session (real PyTorch, in parallel)."""
import os
import pickle
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"


@dataclass(frozen=True)
class Sample:
    name: str
    dir: Path
    id: str
    crash_site: str
    fix_site: str
    recorded: bool

    @property
    def log(self) -> Path:
        return self.dir / "crash.log"


def registered_entries():
    """Every registered family's entry ids, in registry order (tracefix/families)."""
    from tracefix.families import families

    return [entry_id for fam in families() for entry_id in fam.entries]


def discover_samples():
    """The samples of every registered family's entries (the ``id`` in each ``expected.toml``),
    in registry order."""
    found = []
    for exp in sorted(SAMPLES.glob("*/expected.toml")):
        data = tomllib.loads(exp.read_text())
        found.append(Sample(exp.parent.name, exp.parent, data["id"], data["crash_site"], data["fix_site"],
                            bool(data.get("recorded", False))))
    return [s for entry_id in registered_entries() for s in found if s.id == entry_id]


SAMPLE_LIST = discover_samples()


def run_script(cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "train.py"], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def run_tracefix(*args, stdin=None, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracefix", *map(str, args)], input=stdin, cwd=cwd,
                          capture_output=True, timeout=timeout)


def copy_sample(sample: Sample, dest: Path) -> Path:
    target = dest / sample.name
    shutil.copytree(sample.dir, target, ignore=shutil.ignore_patterns("__pycache__", ".tracefix"))
    return target


class SharedRuns:
    """Real runs made once per test session, however many xdist workers ask: ``runs[key]`` computes
    ``make(key, folder)`` under a lock in the folder all workers share, pickles the result there,
    and every later request (from any worker) reads it.  Each key is its own lock, so two workers
    compute two different keys side by side instead of both computing all of them."""

    def __init__(self, base: Path, name: str, make):
        self.base, self.make = base / name, make
        self.base.mkdir(parents=True, exist_ok=True)

    def __getitem__(self, key: str):
        from filelock import FileLock

        done = self.base / f"{key}.pickle"
        with FileLock(str(self.base / f"{key}.lock")):
            if not done.exists():
                folder = self.base / key
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir()
                tmp = done.with_suffix(".part")
                tmp.write_bytes(pickle.dumps(self.make(key, folder)))
                tmp.replace(done)
            return pickle.loads(done.read_bytes())


def shared_base(tmp_path_factory, worker_id: str) -> Path:
    """The temporary folder every xdist worker of this session sees (its own, without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def witness_env(on: bool = True) -> dict:
    """The environment of a sample's run: tracefix's witness armed (``on``), as ``tracefix run`` arms it."""
    from tracefix.runner import hook_env

    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    for k in ("TRACEFIX_ANOMALY", "TRACEFIX_VERIFY_STEPS", "TRACEFIX_WITNESS"):
        env.pop(k, None)
    if on:
        env.update(hook_env(witness=True, base=env))
    return env


WITNESS_TIMEOUT = 300


def _own_lines_start(run_stderr: str) -> int:
    """Where ``tracefix run``'s first line of its own starts (the end when there is none)."""
    m = re.search(r"^tracefix: ", run_stderr, re.M)
    return m.start() if m else len(run_stderr)


def passed_through(run_stderr: str) -> str:
    """What the crashed command printed, as ``tracefix run`` passed it through (its stdout and
    stderr, the witness's block included): everything before tracefix's first line of its own."""
    return run_stderr[:_own_lines_start(run_stderr)]


def crash_log(run_stderr: str) -> str:
    """The plain log a user pipes into tracefix, taken from a ``tracefix run``: what it passed
    through, without the witness's block.  The witness does not change a traceback
    (tests/test_witness.py), so one run serves both the plain diagnosis and --apply --verify."""
    return "".join(ln for ln in passed_through(run_stderr).splitlines(True) if not ln.startswith("tracefix-witness"))


def after_crash(run_stderr: str) -> str:
    """What ``tracefix run`` printed from its first line of its own on (the verify run's output)."""
    return run_stderr[_own_lines_start(run_stderr):]


@pytest.fixture(scope="session")
def sample_runs(tmp_path_factory, worker_id):
    """Each reproducible sample copied and run once, as ``tracefix run --format json --apply
    --verify -- python train.py`` (the witness armed): ``sample_runs[name]`` -> (copy dir, now
    patched; CompletedProcess, text).  Its stdout is the JSON report; its stderr holds the crash as
    passed through (``passed_through``, ``crash_log``), then tracefix's notes and the verify run."""
    by_name = {s.name: s for s in SAMPLE_LIST if not s.recorded}

    def make(name, folder):
        root = copy_sample(by_name[name], folder)
        return root, subprocess.run([sys.executable, "-m", "tracefix", "run", "--format", "json", "--apply",
                                     "--verify", "--root", str(root), "--", sys.executable, "train.py"],
                                    cwd=root, capture_output=True, text=True, timeout=WITNESS_TIMEOUT,
                                    env=witness_env(on=False))

    return SharedRuns(shared_base(tmp_path_factory, worker_id), "sample-runs", make)


def sample_patches(sample: Sample):
    """The patches ``tracefix --format json`` proposes from the sample's own log."""
    import json

    proc = run_tracefix("--format", "json", "--root", sample.dir, stdin=sample.log.read_bytes())
    assert proc.returncode == 0, proc.stderr.decode()
    (diag,) = json.loads(proc.stdout)["diagnoses"]
    return diag["patches"]


def python_files(root: Path) -> dict:
    """The project's .py files (not tracefix's own undo records) by relative path -> bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))
            if ".tracefix" not in p.relative_to(root).parts}


@pytest.fixture(scope="session")
def safe_runs(tmp_path_factory, worker_id, sample_runs):
    """``safe_runs[name]`` -> [(patch number, summary, tracefix --apply result, train.py result or None,
    the .py files as patched)]: each safe patch applied (``--apply --pick N``) to a fresh copy of the
    sample, which is then run (a recorded sample's is only compiled: its error needs CUDA).  A copy
    whose bytes are those ``sample_runs`` verified is not run again: that verified run (to the end of
    the script, without an error) counts, as what the program printed."""
    import json

    by_name = {s.name: s for s in SAMPLE_LIST}

    def verified(name):
        if by_name[name].recorded:
            return None, None
        root, proc = sample_runs[name]
        if json.loads(proc.stdout).get("verification") != "verified":
            return None, None
        printed = "".join(ln for ln in after_crash(proc.stderr).splitlines(True) if not ln.startswith("tracefix"))
        return python_files(root), subprocess.CompletedProcess(proc.args, 0, stdout=printed, stderr="")

    def make(name, folder):
        sample, out = by_name[name], []
        files, run = verified(name)
        for number, patch in enumerate(sample_patches(sample), 1):
            if patch["applicability"] != "safe":
                continue
            root = copy_sample(sample, folder / str(number))
            applied = run_tracefix("--format", "plain", "--apply", "--pick", number, "--root", root,
                                   stdin=sample.log.read_bytes())
            trained = None
            if applied.returncode != 0 or sample.recorded:
                for path in root.rglob("*.py"):
                    compile(path.read_text(encoding="utf-8"), str(path), "exec")
            elif files is not None and python_files(root) == files:
                trained = run
            else:
                trained = run_script(root)
            out.append((number, patch["summary"], applied, trained, python_files(root)))
        return out

    return SharedRuns(shared_base(tmp_path_factory, worker_id), "safe-runs", make)
