"""Shared fixtures: the shipped samples, run once per session (real PyTorch, in parallel)."""
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
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


@pytest.fixture(scope="session")
def sample_runs(tmp_path_factory):
    """Each reproducible sample copied and run once: name -> (copy dir, CompletedProcess)."""
    base = tmp_path_factory.mktemp("runs")
    todo = [s for s in SAMPLE_LIST if not s.recorded]
    copies = {s.name: copy_sample(s, base) for s in todo}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(copies, pool.map(run_script, copies.values())))
    return {name: (copies[name], results[name]) for name in copies}
