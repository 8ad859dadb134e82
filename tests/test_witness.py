"""The witness (tracefix/hooks/tracefix_witness.py) and the reader's side of its evidence block.

The ``torch`` tests run real PyTorch: every live sample under the witness (its evidence must name
the sample's known culprit, ``witness_site`` in expected.toml, and the crash must read as
without it), a correct training loop with and without the witness (same losses, bit for bit),
and a probe of what the witness keeps and removes.  The reader tests need no torch.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import SAMPLE_LIST, WITNESS_TIMEOUT as TIMEOUT, copy_sample, passed_through, witness_env
from tracefix.families import families, of_entry
from tracefix.hooks import HOOKS_DIR, WITNESS_DATA_MARK, WITNESS_MARK
from tracefix.paths import is_library_path
from tracefix.reader import parse_evidence, read_tracebacks
from tracefix.record import replace

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

LIVE = [s for s in SAMPLE_LIST if not s.recorded]
# the evidence kinds each entry's family declares (tracefix/families/<name>/family.py)
KINDS = {entry: set(fam.evidence) for fam in families() for entry in fam.entries}


def run_py(args, cwd: Path, on: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                          env=witness_env(on))


def without_block(text: str) -> str:
    return "".join(ln for ln in text.splitlines(True) if not ln.startswith("tracefix-witness"))


def crash_shape(text: str):
    """(basename, line, code) of the user frames and the final exception line."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in .*\n\s+(.*)', text)
    # (a family's recorder that wraps Module.to is on the stack of a crash inside .to(): a library frame)
    user = [(p.replace("\\", "/").rsplit("/", 1)[-1], int(n), c.strip()) for p, n, c in frames
            if not is_library_path(p)]
    last = [ln for ln in text.splitlines() if re.match(r"^\w+(Error|Exception)", ln)]
    return user, last[-1] if last else None


# --- every live sample under the witness ------------------------------------------------------
@pytest.fixture(scope="session")
def witness_runs(sample_runs):
    """``witness_runs[name]`` -> (copy dir, what the crashed run printed, its exit status): each live
    sample's one run under the witness, as ``tracefix run`` passed it through (conftest.sample_runs;
    the copy has since been patched)."""
    class Runs:
        def __getitem__(self, name):
            root, proc = sample_runs[name]
            return root, passed_through(proc.stderr), json.loads(proc.stdout)["command_exit_code"]

    return Runs()


def _expected(sample):
    return tomllib.loads((sample.dir / "expected.toml").read_text(encoding="utf-8"))


# samples of families whose recorder names a culprit, and those (no recorder) it must leave alone
WITNESSED = [s for s in LIVE if "witness_site" in _expected(s)]
UNWITNESSED = [s for s in LIVE if "witness_site" not in _expected(s)]


@pytest.mark.torch
@pytest.mark.parametrize("sample", UNWITNESSED, ids=[s.name for s in UNWITNESSED])
def test_without_a_recorder_the_witness_leaves_the_crash_alone(sample, witness_runs):
    assert not of_entry(sample.id).evidence, "a family with witness evidence needs witness_site in its samples"
    _root, out, code = witness_runs[sample.name]
    assert code != 0, "the witness must not stop the crash"
    assert crash_shape(without_block(out)) == crash_shape(sample.log.read_text())
    assert not [ln for ln in out.splitlines() if ln.startswith("tracefix-witness")], out[-2000:]


@pytest.mark.torch
@pytest.mark.parametrize("sample", WITNESSED, ids=[s.name for s in WITNESSED])
def test_witness_names_the_samples_culprit(sample, witness_runs):
    expected = _expected(sample)
    root, out, code = witness_runs[sample.name]
    assert code != 0, "the witness must not stop the crash"
    # The crash reads as without the witness: same user frames, same exception line.
    assert crash_shape(without_block(out)) == crash_shape(sample.log.read_text())
    blocks = [ln for ln in out.splitlines() if ln.startswith("tracefix-witness")]
    assert [b.split(":", 1)[0] for b in blocks] == ["tracefix-witness", "tracefix-witness-data"], out[-3000:]
    tbs = [tb for tb in read_tracebacks(io.BytesIO(out.encode())) if tb.evidence is not None]
    assert len(tbs) == 1
    ev = tbs[0].evidence
    assert ev.kind in KINDS[sample.id]
    assert blocks[0] == WITNESS_MARK + ev.summary
    top = ev.sites[0]
    assert Path(top.path).is_absolute() and Path(top.path).exists()
    rel = Path(top.path).resolve().relative_to(root.resolve()).as_posix()
    assert f"{rel}:{top.line}" == expected["witness_site"], ev
    # the line as it was when the witness saw it (the copy is patched since): the sample's own
    local = (sample.dir / rel).read_text(encoding="utf-8").splitlines()[top.line - 1].strip()
    assert top.code == local[:160]
    data = json.loads(ev.data)
    assert data["v"] == 1 and data["exc"] == tbs[0].exc_type
    crash_user = crash_shape(out)[0]
    backward = ev.site("backward")
    if backward is not None:            # the failing call, as the traceback's innermost user frame
        assert (Path(backward.path).name, backward.line) == crash_user[-1][:2]


# --- the witness does not change what the program computes ------------------------------------
CORRECT = r'''
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU(inplace=True)     # legal: addmm does not save its output
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        h = self.drop(self.act(self.fc1(x)))
        h = h * 2.0
        h.add_(0.5)                          # legal: a multiplication by a number saves nothing of h
        h[:, 0] = 0.0                        # legal for the same reason
        return self.fc2(h)


model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
buf = torch.empty(64, 4)
witness = sys.modules.get("tracefix_witness")
for step in range(STEPS):
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    torch.sub(out.float().detach(), y, out=buf)          # out= into a buffer outside the graph
    loss = F.mse_loss(out.float(), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    print(step, loss.item().hex(), buf.sum().item().hex())
    if witness is not None and step < 5:
        print("armed after step", step, witness.armed(), file=sys.stderr)
print("witness", None if witness is None else witness.armed(), file=sys.stderr)
'''


@pytest.mark.torch
def test_same_losses_bit_for_bit_and_disarms_after_three_steps(tmp_path):
    (tmp_path / "train.py").write_text(CORRECT.replace("STEPS", "300"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        on, off = pool.map(lambda flag: run_py(["train.py"], tmp_path, flag), (True, False))
    assert on.returncode == 0 and off.returncode == 0, on.stderr[-3000:] + off.stderr[-3000:]
    assert len(off.stdout.splitlines()) == 300
    assert on.stdout == off.stdout
    assert "witness None" in off.stderr                     # the plain run had no witness
    armed = re.findall(r"armed after step (\d) (\w+)", on.stderr)
    # armed through the first two optimizer steps, gone after the third (DISARM_STEPS = 3)
    assert armed == [("0", "True"), ("1", "True"), ("2", "False"), ("3", "False"), ("4", "False")]
    assert "witness False" in on.stderr
    assert "tracefix-witness" not in on.stderr


PROBE = r'''
import gc, sys, threading, weakref
import torch
import torch.nn as nn

sys.path.insert(0, HOOKS)
import tracefix_witness as w
from tracefix.hooks import tracefix_witness as twin

assert twin is w, "one witness per process, whichever name imports it"
original_init, original_hook = nn.Module.__init__, sys.excepthook
w.install()
assert w.armed()
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x = torch.randn(16, 4)
act = model[1](model[0](x))
ref = weakref.ref(act)
out = act * 2.0
out.add_(1.0)                      # a recorded write ...
loss = model[2](out).pow(2).mean()  # ... and recorded creators
loss.backward()
rec = w._state["rec"]
assert any(r["op"] == "add_" for r in rec.writes), rec.writes
assert rec.creators
del act, out, loss
gc.collect()
assert ref() is None, "the witness kept an activation alive"
temp = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True))   # its ReLU's write is recorded ...
mref = weakref.ref(temp)
temp(x).sum().backward()
assert any(r["op"] == "relu" for r in rec.writes)
del temp
gc.collect()
assert mref() is None, "the witness kept a module (and its parameters) alive"   # ... by weak reference

# another thread: not watched, not disturbed
def work():
    h = model(torch.randn(2, 4)); h.mul_(2)
t = threading.Thread(target=work); t.start(); t.join()
assert not any(r["shape"] == [2, 2] for r in rec.writes)

assert w.evidence_block(ValueError("unrelated")) == ""
torch.compile(model)               # compiled regions are not watched: the witness steps aside
assert not w.armed()
assert torch._C._len_torch_function_stack() == 0
w.uninstall()
assert nn.Module.__init__ is original_init and sys.excepthook is original_hook
import torch.nn.modules.module as mm
assert not mm._global_forward_pre_hooks and not mm._global_forward_hooks
print("probe ok")
'''


@pytest.mark.torch
def test_witness_keeps_no_tensor_alive_and_removes_everything(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE.replace("HOOKS", repr(str(HOOKS_DIR))))
    env = witness_env(False)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "probe.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=TIMEOUT)
    assert out.returncode == 0 and "probe ok" in out.stdout, out.stderr[-3000:]


# --- tracefix run ---------------------------------------------------------------------------
@pytest.mark.torch
def test_run_uses_evidence_and_skips_the_anomaly_rerun(tmp_path):
    sample = next(s for s in LIVE if s.name == "inplace-residual-augassign")
    root = copy_sample(sample, tmp_path)
    run = subprocess.run([sys.executable, "-m", "tracefix", "run", "--anomaly", "--format", "json", "--root",
                          str(root), "--", sys.executable, "train.py"], cwd=root, capture_output=True,
                         timeout=TIMEOUT, env=witness_env(False))
    report = json.loads(run.stdout)
    (d,) = report["diagnoses"]
    assert d["evidence"]["kind"] == "inplace-write"
    assert "The witness saw" not in run.stdout.decode()            # json: the record, not the sentence
    assert b"anomaly mode is slow" not in run.stderr and b"--anomaly: not needed" in run.stderr
    assert f'{d["fix_sites"][0]["path"]}:{d["fix_sites"][0]["line"]}' == sample.fix_site
    off = subprocess.run([sys.executable, "-m", "tracefix", "run", "--no-witness", "--format", "plain", "--root",
                          str(root), "--", sys.executable, "train.py"], cwd=root, capture_output=True,
                         timeout=TIMEOUT, env=dict(witness_env(False), TRACEFIX_WITNESS="1"))
    assert b"tracefix-witness" not in off.stderr and b"The witness saw" not in off.stdout
    assert b"inplace-modification" in off.stdout


# --- reader: the block in logs (no torch) ----------------------------------------------------
TB = """Traceback (most recent call last):
  File "/home/u/proj/train.py", line 31, in <module>
    loss.backward()
  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward
    torch.autograd.backward(
RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [16, 8]], which is output 0 of Tanh, is at version 1; expected version 0 instead. Hint: enable anomaly detection.
"""


def block(summary="'h' [16, 8] (output of tanh) was changed in place by mul_ at adapters.py:17", line=17,
          exc="RuntimeError", kind="inplace-write") -> str:
    data = {"v": 1, "kind": kind, "exc": exc, "msg": "one of the variables", "summary": summary,
            "sites": [{"role": "write", "path": "/home/u/proj/adapters.py", "line": line,
                       "code": "h.mul_(self.scale)", "detail": "mul_: version 0 -> 1", "module": "1.adapter"},
                      {"role": "backward", "path": "/home/u/proj/train.py", "line": 31, "code": "loss.backward()",
                       "detail": "", "module": ""}],
            "tensor": {"shape": [16, 8], "dtype": "float32", "version": [0, 1], "node": "Tanh"}}
    return f"{WITNESS_MARK}{summary}\n{WITNESS_DATA_MARK}{json.dumps(data)}\n"


def read(text: str, **kw):
    return list(read_tracebacks(io.BytesIO(text.encode()), **kw))


def test_reader_attaches_the_block_to_the_exception_before_it():
    (tb,) = read("epoch 1\n" + TB + block() + "after\n")
    ev = tb.evidence
    assert ev is not None and ev.kind == "inplace-write"
    assert ev.summary.startswith("'h' [16, 8]")
    assert [(s.role, s.path, s.line, s.module) for s in ev.sites] == [
        ("write", "/home/u/proj/adapters.py", 17, "1.adapter"), ("backward", "/home/u/proj/train.py", 31, "")]
    assert ev.site("construct", "write").line == 17
    assert json.loads(ev.data)["tensor"]["version"] == [0, 1]
    assert "tracefix-witness" not in tb.message       # the block never leaks into the message


def test_reader_without_block_is_unchanged():
    (plain,) = read(TB)
    (with_block,) = read(TB + block())
    assert plain.evidence is None
    assert plain == replace(with_block, evidence=None)


def test_reader_ranks_interleaved():
    r0 = (TB + block(line=17)).splitlines()
    r1 = (TB.replace("line 31", "line 32") + block(summary="rank one", line=99)).splitlines()
    lines = []
    for a, b in zip(r0, r1):
        lines += [f"[rank0]: {a}", f"[rank1]: {b}"]
    tbs = {tb.rank: tb for tb in read("\n".join(lines) + "\n")}
    assert tbs[0].evidence.sites[0].line == 17 and tbs[1].evidence.sites[0].line == 99
    assert tbs[1].evidence.summary == "rank one"
    # the other order: one rank's block printed while the other is still in its traceback
    lines = [f"[rank1]: {ln}" for ln in r1[:3]] + [f"[rank0]: {ln}" for ln in r0] + [f"[rank1]: {ln}" for ln in r1[3:]]
    tbs = {tb.rank: tb for tb in read("\n".join(lines) + "\n")}
    assert tbs[0].evidence.sites[0].line == 17 and tbs[1].evidence.sites[0].line == 99


@pytest.mark.parametrize("bad", [
    WITNESS_DATA_MARK + '{"v": 1, "kind": "inplace-write", "summary": "x", "sites": [{"role": "wr',  # truncated
    WITNESS_DATA_MARK + "\x00\x01garbage \xff{{{",
    WITNESS_DATA_MARK + '{"v": 2, "kind": "inplace-write", "summary": "x", "sites": []}',          # other version
    WITNESS_DATA_MARK + '{"v": 1, "kind": "inplace-write", "summary": "x", "sites": [{"role": "write", "path": 3}]}',
    WITNESS_DATA_MARK + '[1, 2, 3]',
    WITNESS_DATA_MARK,
])
def test_reader_ignores_broken_blocks(bad):
    assert parse_evidence(bad) is None
    (tb,) = read(TB + WITNESS_MARK + "a summary\n" + bad + "\n")
    assert tb.evidence is None
    assert tb.message == read(TB)[0].message


def test_reader_block_of_another_exception_or_without_one_is_ignored():
    (tb,) = read(TB + block(exc="ValueError"))
    assert tb.evidence is None
    assert read(block()) == []
    (tb,) = read(block() + TB)            # before the traceback: not its evidence
    assert tb.evidence is None


def test_big_file_search_finds_the_block(tmp_path):
    log = tmp_path / "big.log"
    filler = "".join(f"step {i} loss 0.{i:06d}\n" for i in range(40000))
    log.write_text(filler + TB + block() + filler)
    with open(log, "rb") as fh:
        tbs = list(read_tracebacks(fh, seek_min=1 << 16, chunk_size=1 << 16))
    assert len(tbs) == 1 and tbs[0].evidence is not None and tbs[0].evidence.sites[0].line == 17


def test_cli_shows_the_evidence(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(TB + block())
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "tracefix", "--no-patch", "--root", str(tmp_path), *args,
                               str(log)], capture_output=True, text=True, timeout=TIMEOUT)
    js = json.loads(cli("--format", "json").stdout)
    ev = js["diagnoses"][0]["evidence"]
    assert ev["kind"] == "inplace-write" and ev["sites"][0]["line"] == 17 and json.loads(ev["data"])["v"] == 1
    assert "The witness saw: 'h' [16, 8] (output of tanh) was changed in place by mul_" in cli("--format", "plain").stdout
    log.write_text(TB)
    assert json.loads(cli("--format", "json").stdout)["diagnoses"][0]["evidence"] is None


NO_OPTIMIZER = r'''
import sys
import torch

sys.path.insert(0, HOOKS)
import tracefix_witness as w

w.install()
m = torch.nn.Linear(4, 1)
for i in range(12):                       # a hand-written update: no torch optimizer to count
    loss = m(torch.randn(3, 4)).pow(2).mean()
    loss.backward()
    with torch.no_grad():
        for p in m.parameters():
            p -= 0.1 * p.grad
            p.grad = None
    if i == 2:
        assert w.armed()
assert not w.armed() and torch._C._len_torch_function_stack() == 0
w.install()                               # (a second install is a no-op)
with torch.inference_mode():              # inference tensors have no version counter
    t = torch.ones(3)
    t.add_(1)
print("ok", t.tolist())
'''


@pytest.mark.torch
def test_witness_disarms_without_an_optimizer_and_tolerates_inference_mode(tmp_path):
    (tmp_path / "loop.py").write_text(NO_OPTIMIZER.replace("HOOKS", repr(str(HOOKS_DIR))))
    out = run_py(["loop.py"], tmp_path, on=False)
    assert out.returncode == 0 and "ok [2.0, 2.0, 2.0]" in out.stdout, out.stderr[-3000:]


PATTERNS = {
    # foreach optimizer update between a backward(retain_graph=True) and the next backward
    "foreach_step.py": ("param-update", "step", 7, '''import torch, torch.nn as nn
torch.manual_seed(0)
D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(D.parameters(), foreach=True)
out = D(torch.randn(5, 4))
opt.zero_grad(); out.mean().backward(retain_graph=True)
opt.step()
(out ** 2).mean().backward()
'''),
    # a half default dtype decided the parameters' dtype
    "default_dtype.py": ("half-params", "cast", 2, '''import torch, torch.nn as nn
torch.set_default_dtype(torch.float16)
model = nn.Linear(4, 2)
torch.set_default_dtype(torch.float32)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale(model(torch.randn(3, 4, dtype=torch.float16)).float().mean()).backward()
scaler.step(opt)
'''),
    # a parameter built in half precision
    "half_param.py": ("half-params", "param", 5, '''import torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 2, dtype=torch.float16))
    def forward(self, x): return x @ self.w
model = M()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale(model(torch.randn(3, 4, dtype=torch.float16)).float().mean()).backward()
scaler.step(opt)
'''),
    # cast twice: the builder's .half(), then the caller's .to(dtype=half), which changes no dtype
    "cast_twice.py": ("half-params", "cast", 3, '''import torch, torch.nn as nn
def build():
    return nn.Linear(4, 2).half()
model = build().to(dtype=torch.float16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale(model(torch.randn(3, 4, dtype=torch.float16)).float().mean()).backward()
scaler.step(opt)
'''),
    # adapters built in half one parameter at a time, in two layers: every one of them is counted
    "half_adapters.py": ("half-params", "param", 7, '''import torch, torch.nn as nn
class Adapter(nn.Module):
    def __init__(self, d, dtype=torch.float16):
        super().__init__()
        self.base = nn.Linear(d, d).requires_grad_(False)
        self.a = nn.Parameter(torch.zeros(2, d, dtype=dtype))
        self.b = nn.Parameter(torch.zeros(d, 2, dtype=dtype))
    def forward(self, x):
        return self.base(x) + (x.half() @ self.a.t() @ self.b.t()).float()
model = nn.Sequential(Adapter(4), Adapter(4))
opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
scaler = torch.amp.GradScaler("cpu")
scaler.scale(model(torch.randn(3, 4)).mean()).backward()
scaler.step(opt)
'''),
}


@pytest.mark.torch
def test_witness_patterns(tmp_path):
    for name, (_k, _r, _l, src) in PATTERNS.items():
        (tmp_path / name).write_text(src)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(PATTERNS, pool.map(lambda n: run_py([n], tmp_path), PATTERNS)))
    for name, (kind, role, line, _src) in PATTERNS.items():
        proc = runs[name]
        assert proc.returncode != 0, name
        (tb,) = [tb for tb in read_tracebacks(io.BytesIO(proc.stderr.encode())) if tb.evidence is not None]
        top = tb.evidence.sites[0]
        assert (tb.evidence.kind, top.role, Path(top.path).name, top.line) == (kind, role, name, line), proc.stderr[-2000:]
        if name == "cast_twice.py":       # the second cast is named too: it alone keeps them half
            assert [(x.role, x.line) for x in tb.evidence.sites[:2]] == [("cast", 3), ("cast", 4)]
            assert "again at" in tb.evidence.summary
        if name == "half_adapters.py":
            assert tb.evidence.summary.startswith("4 trainable parameters were built as float16 at "), tb.evidence.summary


WORKERS = r'''
import sys
import torch
from torch.utils.data import DataLoader, Dataset


class Probe(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        w = sys.modules.get("tracefix_witness")
        t = torch.ones(2)
        t.mul_(2)                                  # an in-place op in the worker
        return torch.tensor([float(w is not None and w.armed()), float(torch._C._len_torch_function_stack())])


if __name__ == "__main__":
    assert sys.modules["tracefix_witness"].armed()
    for method in ("fork", "spawn"):
        seen = torch.cat(list(DataLoader(Probe(), batch_size=4, num_workers=2, multiprocessing_context=method)))
        print(method, seen.sum().item())
    print("main", sys.modules["tracefix_witness"].armed())
'''


@pytest.mark.torch
def test_dataloader_workers_are_not_watched(tmp_path):
    (tmp_path / "workers.py").write_text(WORKERS)
    out = run_py(["workers.py"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["fork", "0.0", "spawn", "0.0", "main", "True"]


# --- the creators the witness names for a non-scalar loss ------------------------------------------
HARD_MINING_MODEL = '''import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 1)

    def forward(self, x, target):
        pred = self.body(x).squeeze(-1)
        err = (pred - target).abs()
        return pred, err


torch.manual_seed(0)
model = Net()
x, t = torch.randn(40, 8), torch.randn(40)
pred, loss = model(x, t)
loss.backward()
'''


@pytest.mark.torch
def test_nonscalar_creators_stop_where_another_per_sample_operand_joins(tmp_path):
    """`err = (pred - target).abs()`: `pred - target` joins a second per-sample tensor, so `pred`'s
    own line is no creator: reducing the prediction cannot make the loss a scalar."""
    (tmp_path / "train.py").write_text(HARD_MINING_MODEL)
    run = run_py(["train.py"], tmp_path)
    assert "only for scalar outputs" in run.stderr
    data = json.loads(next(ln for ln in run.stderr.splitlines()
                           if ln.startswith("tracefix-witness-data: "))[len("tracefix-witness-data: "):])
    creators = [s["line"] for s in data["sites"] if s["role"] == "creator"]
    assert creators == [12]
    (tmp_path / "crash.log").write_text(run.stderr)
    out = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--root", str(tmp_path),
                          str(tmp_path / "crash.log")], capture_output=True, timeout=TIMEOUT, env=witness_env(False))
    (d,) = json.loads(out.stdout)["diagnoses"]
    assert 11 not in [s["line"] for s in d["fix_sites"]]


DATA_CAST = """
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
for p in model.parameters():
    p.data = p.data.to(torch.float16)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(3):
    with torch.autocast("cpu", dtype=torch.float16):
        loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
"""


@pytest.mark.torch
def test_a_data_assignment_cast_is_witnessed_and_no_evidence_is_said(tmp_path):
    """issue 22 item 8: `p.data = p.data.to(torch.float16)` is recorded (once per parameter), and a
    run whose error the witness saw nothing of says so in one line."""
    (tmp_path / "train.py").write_text(DATA_CAST.lstrip("\n"))
    run = subprocess.run([sys.executable, "-m", "tracefix", "run", "--format", "json", "--root", str(tmp_path),
                          "--", sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                         timeout=TIMEOUT, env=witness_env(False))
    (d,) = json.loads(run.stdout)["diagnoses"]
    line = DATA_CAST.lstrip("\n").splitlines().index("    p.data = p.data.to(torch.float16)") + 1
    assert d["evidence"]["kind"] == "half-params" and d["evidence"]["summary"].startswith("4 trainable parameters")
    assert (d["evidence"]["sites"][0]["line"], d["fix_sites"][0]["line"]) == (line, line)
    assert b"recorded no evidence" not in run.stderr
    # a plain leaf tensor made in fp16 is no module parameter cast: nothing to witness
    (tmp_path / "train.py").write_text(DATA_CAST.lstrip("\n").replace(
        "for p in model.parameters():\n    p.data = p.data.to(torch.float16)\n", "").replace(
        "model.parameters()", "[w]").replace("model(x)", "(x.half() @ w)").replace(
        "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))",
        "w = torch.randn(8, 1, dtype=torch.float16, requires_grad=True)"))
    run = subprocess.run([sys.executable, "-m", "tracefix", "run", "--format", "plain", "--root", str(tmp_path),
                          "--", sys.executable, "train.py"], cwd=tmp_path, capture_output=True,
                         timeout=TIMEOUT, env=witness_env(False))
    assert b"Attempting to unscale FP16 gradients" in run.stderr
    assert run.stderr.count(b"recorded no evidence") == 1 and b"The witness saw" not in run.stdout
