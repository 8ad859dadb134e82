"""The shape of the code: the pipeline's layer order, and one folder per error family.

Every ``import`` in tracefix/ is read with :mod:`ast`, function-local ones too (a lazy import is
still a dependency).  Arrows point down the pipeline (read -> match -> locate -> patch -> render);
families never import each other, and shared code reaches a family only through the registry.
"""
import ast
import re
from pathlib import Path

import pytest

from tracefix.families import FAMILIES, families, part
from tracefix.knowledge import load_entries

PKG = Path(__file__).resolve().parent.parent / "tracefix"

# Lowest first.  A module may import modules of its own layer or of a lower one.
LAYERS = (
    ("records", ("tracefix.record", "tracefix.records", "tracefix.version", "tracefix.vocab", "tracefix.scan", "tracefix.hooks",
                 "tracefix.families", "tracefix.families.api", "tracefix.families.*.family", "tracefix.families.*")),
    ("read", ("tracefix.reader",)),
    ("knowledge", ("tracefix.knowledge",)),
    ("match", ("tracefix.matcher",)),
    ("source", ("tracefix.paths", "tracefix.frames", "tracefix.pysource", "tracefix.notebook", "tracefix.cellframes",
                "tracefix.cellsites")),
    ("locate", ("tracefix.locator", "tracefix.locator.*", "tracefix.families.*.locate", "tracefix.families.*.evidence",
                # a family's pure helpers shared by its locate and fix steps
                "tracefix.families.linear_shape.shapes")),
    ("patch", ("tracefix.patcher", "tracefix.patcher.*", "tracefix.families.*.fix", "tracefix.families.*.unpatchable")),
    ("render", ("tracefix.render",)),
    ("run", ("tracefix.pipeline", "tracefix.runner", "tracefix.jupyter")),
    ("commands", ("tracefix.exits", "tracefix.options", "tracefix.diagnose", "tracefix.commands", "tracefix.mcp_server")),
    ("entry", ("tracefix.cli", "tracefix.__main__", "tracefix")),
)
# run in the user's process: the witness core and each family's recorder, which it loads by path
CHILD = ("tracefix.hooks.sitecustomize", "tracefix.hooks.tracefix_witness") + tuple(
    f"tracefix.families.{name}.witness" for name in FAMILIES if (PKG / "families" / name / "witness.py").is_file())


def _modules():
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


MODULES = _modules()


def _imports(name):
    """The tracefix modules ``name`` imports, anywhere in its file."""
    path = MODULES[name]
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]
        for t in targets:
            if t == "tracefix.entries" or t.startswith("tracefix.entries."):
                continue        # the knowledge/ folder, installed as package data
            while t not in MODULES and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in MODULES and t != name and t.startswith("tracefix"):
                found.add(t)
    return found


def _matches(name, pattern):
    if "*" not in pattern:
        return name == pattern
    head, tail = pattern.split("*", 1)
    if not name.startswith(head):
        return False
    rest = name[len(head):]
    return "." not in rest if not tail else (rest.endswith(tail) and "." not in rest[:-len(tail)])


def _layer(name):
    # the most specific pattern wins (tracefix.families.x.locate over tracefix.families.*)
    best = None
    for i, (_, patterns) in enumerate(LAYERS):
        for pat in patterns:
            if _matches(name, pat) and (best is None or len(pat) > best[1]):
                best = (i, len(pat))
    return None if best is None else best[0]


def _family_of(name):
    parts = name.split(".")
    return parts[2] if len(parts) >= 3 and parts[1] == "families" and parts[2] in FAMILIES else None


@pytest.mark.parametrize("name", sorted(set(MODULES) - set(CHILD)))
def test_imports_point_down_the_pipeline(name):
    mine = _layer(name)
    assert mine is not None, f"{name} is in no layer: add it to LAYERS"
    up = sorted(t for t in _imports(name) if t not in CHILD and (_layer(t) or 0) > mine)
    assert not up, f"{name} ({LAYERS[mine][0]}) reaches up the pipeline: " + ", ".join(
        f"{t} ({LAYERS[_layer(t)][0]})" for t in up)


def test_the_child_process_never_imports_tracefix():
    assert len(CHILD) > 2
    for name in CHILD:
        assert _imports(name) == set(), name
        text = MODULES[name].read_text(encoding="utf-8")
        # tracefix_witness is the child's own module, a sibling file; the package is what must not load
        assert not re.search(r"^\s*(import|from)\s+tracefix\b(?!_)", text, re.M), name


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("tracefix.")))
def test_families_never_import_each_other_and_are_reached_through_the_registry(name):
    fam = _family_of(name)
    for t in _imports(name):
        other = _family_of(t)
        if other is None:
            continue
        if fam is None:
            pytest.fail(f"{name} imports {t}: shared code reaches a family through tracefix.families")
        assert other == fam, f"{name} (family {fam}) imports {t} (family {other})"


@pytest.mark.parametrize("fam", FAMILIES)
def test_a_familys_diagnose_parts_never_load_libcst(fam):
    for part_name in ("family", "locate", "evidence", "unpatchable"):
        name = f"tracefix.families.{fam}.{part_name}"
        if name not in MODULES:
            continue
        text = MODULES[name].read_text(encoding="utf-8")
        assert "libcst" not in text, name
        assert not any(_layer(t) is not None and _layer(t) >= _layer("tracefix.patcher") for t in _imports(name)), name


def test_the_registry_names_every_family_folder_once():
    folders = sorted(p.parent.name for p in (PKG / "families").glob("*/family.py"))
    assert sorted(FAMILIES) == folders
    assert len(set(FAMILIES)) == len(FAMILIES)
    assert [f.name for f in families()] == list(FAMILIES)


@pytest.mark.parametrize("attr", ["entries", "locate", "fix_kinds", "evidence", "gate_words"])
def test_what_families_declare_is_declared_once(attr):
    """TorchFix's distinct error codes: no entry, locate name, fix kind or evidence kind is claimed
    by two families (a gate word may be shared: both families' messages keep it)."""
    seen = {}
    for fam in families():
        for key in getattr(fam, attr):
            if attr == "gate_words":
                assert key == key.lower(), (fam.name, key)
                continue
            assert key not in seen, f"{attr} {key!r}: {seen.get(key)} and {fam.name}"
            seen[key] = fam.name


def test_every_builtin_entry_is_served_by_its_family():
    by_id = {e.id: e for e in load_entries()}
    for fam in families():
        for entry_id in fam.entries:
            assert entry_id in by_id, (fam.name, entry_id)
            assert by_id[entry_id].locate in fam.locate, (entry_id, by_id[entry_id].locate)
    served = {i for fam in families() for i in fam.entries}
    assert set(by_id) <= served


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.name)
def test_a_familys_parts_are_what_it_declares(fam):
    from tracefix.patcher.context import FIXERS

    locate = part(fam, "locate")
    for fn in fam.locate.values():
        assert callable(getattr(locate, fn, None)), (fam.name, fn)
    if fam.evidence:
        assert callable(getattr(part(fam, "evidence"), "site_from_line", None)), fam.name
    fix = part(fam, "fix")
    registered = {k for k, f in FIXERS.items() if f.__module__ == fix.__name__}
    assert registered, fam.name
    assert registered <= set(fam.fix_kinds), sorted(registered - set(fam.fix_kinds))
    for cause, prefixes in fam.rival_causes.items():
        assert any(k.startswith(prefixes) for k in fam.fix_kinds), (fam.name, cause)


# a name each shared vocabulary holds, and only it: a set literal elsewhere that names one is a copy
VOCAB_MARKERS = {"AdamW": "OPTIMIZER_CLASSES", "expand_as": "VIEW_METHODS", "zeros_like": "TENSOR_FACTORIES",
                 "retain_grad_": "NOT_INPLACE_METHODS"}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n not in ("tracefix.vocab",) + CHILD))
def test_shared_vocabulary_has_one_home(name):
    """optimizer classes, view methods, tensor factories, not-in-place methods: tracefix.vocab only
    (the witness, which runs in the user's process, keeps autograd node names of its own)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            for marker, home in VOCAB_MARKERS.items():
                assert marker not in words, f"{name}:{node.lineno} spells out {home}; import it from tracefix.vocab"


def test_the_wheel_ships_every_package(tmp_path):
    """The built wheel holds every folder of tracefix/ (a new family's too: no list to add it to),
    the built-in entries and their pre-parsed heads."""
    import shutil
    import subprocess
    import sys
    import zipfile

    # built from a copy of what the build reads: setuptools' build/ folder in the checkout could
    # hold files of modules removed since, and would ship them
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(PKG.parent / name, src / name)
    for folder in ("tracefix", "knowledge"):
        shutil.copytree(PKG.parent / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("tracefix-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (*PKG.rglob("*.py"), *(PKG / "hooks").iterdir()):   # every package's __init__.py among them
        if "__pycache__" not in path.parts:
            assert path.relative_to(PKG.parent).as_posix() in names
    for toml in (PKG.parent / "knowledge").glob("*.toml"):
        assert f"tracefix/entries/{toml.name}" in names
    assert "tracefix/entries/heads.marshal" in names
