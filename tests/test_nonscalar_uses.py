"""Real-torch multi-file programs whose non-scalar loss has several uses (issue 19, class 1):
the first fix site is the producer that covers every use, no patch leaving a use is `safe`, and
the recommended patch trains through the evaluation pass. Each crash script runs once per module."""
import json
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor


def d(s):
    return textwrap.dedent(s).lstrip("\n")

MODELS = d('''
    import torch.nn as nn


    class MLP(nn.Module):
        def __init__(self, d_in=8, hidden=16, d_out=3):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))

        def forward(self, x):
            return self.net(x)
    ''')

TRAIN_HEAD = d('''
    import argparse
    import logging

    import torch

    from models import MLP

    log = logging.getLogger("train")


    def batches(n=64, d_in=8, bs=16, classes=3, seed=0):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, d_in, generator=g)
        y = torch.randint(0, classes, (n,), generator=g)
        return list(zip(x.split(bs), y.split(bs)))
    ''')

CASES = {}

# 1. the criterion is built with reduction='none' and also called by evaluate()
CASES["eval-criterion"] = {
    "models.py": MODELS,
    "engine.py": d('''
        import torch


        def train_one_epoch(model, criterion, optimizer, loader):
            model.train()
            running = 0.0
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running += loss.item()
            return running / len(loader)


        @torch.no_grad()
        def evaluate(model, criterion, loader):
            model.eval()
            total = 0.0
            for x, y in loader:
                total += criterion(model(x), y).item()
            return total / len(loader)
        '''),
    "train.py": (TRAIN_HEAD + d('''


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--epochs", type=int, default=2)
            parser.add_argument("--lr", type=float, default=0.05)
            args = parser.parse_args()
            logging.basicConfig(level=logging.INFO)
            torch.manual_seed(0)
            model = MLP()
            criterion = torch.nn.CrossEntropyLoss(reduction="none")
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
            loader = batches()
            for epoch in range(args.epochs):
                train_loss = train_one_epoch(model, criterion, optimizer, loader)
                val_loss = evaluate(model, criterion, loader)
                log.info("epoch %d train %.4f val %.4f", epoch, train_loss, val_loss)
                print(f"epoch {epoch} train {train_loss:.4f} val {val_loss:.4f}")


        if __name__ == "__main__":
            main()
        ''')).replace("from models import MLP", "from engine import evaluate, train_one_epoch\nfrom models import MLP"),
}

# 2. a loss function (not a known name) returns per-sample values; evaluate() calls it too
CASES["eval-loss-fn"] = {
    "models.py": MODELS,
    "losses.py": d('''
        import torch.nn.functional as F


        def regression_loss(pred, target):
            """Squared error per example."""
            return (pred - target).pow(2).sum(dim=1)
        '''),
    "train.py": (TRAIN_HEAD + d('''


        def evaluate(model, loader):
            model.eval()
            total = 0.0
            with torch.no_grad():
                for x, y in loader:
                    target = torch.nn.functional.one_hot(y, 3).float()
                    total += float(regression_loss(model(x), target))
            return total / len(loader)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--epochs", type=int, default=2)
            args = parser.parse_args()
            torch.manual_seed(0)
            model = MLP()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
            loader = batches()
            for epoch in range(args.epochs):
                model.train()
                train_loss = 0.0
                for x, y in loader:
                    target = torch.nn.functional.one_hot(y, 3).float()
                    loss = regression_loss(model(x), target)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    train_loss += loss.item()
                val = evaluate(model, loader)
                print(f"epoch {epoch} train {train_loss / len(loader):.4f} val {val:.4f}")


        if __name__ == "__main__":
            main()
        ''')).replace("from models import MLP", "from losses import regression_loss\nfrom models import MLP"),
}

# 3. VAE: BCE (sum) + KLD summed over dim=1 only -> per-sample
CASES["vae-kld"] = {
    "models.py": d('''
        import torch
        import torch.nn as nn


        class VAE(nn.Module):
            def __init__(self, d=20, z=4):
                super().__init__()
                self.enc = nn.Linear(d, 16)
                self.mu = nn.Linear(16, z)
                self.logvar = nn.Linear(16, z)
                self.dec = nn.Sequential(nn.Linear(z, 16), nn.ReLU(), nn.Linear(16, d))

            def forward(self, x):
                h = torch.relu(self.enc(x))
                mu, logvar = self.mu(h), self.logvar(h)
                z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
                return torch.sigmoid(self.dec(z)), mu, logvar
        '''),
    "losses.py": d('''
        import torch
        import torch.nn.functional as F


        def loss_function(recon_x, x, mu, logvar):
            BCE = F.binary_cross_entropy(recon_x, x, reduction="sum")
            KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1)
            return BCE + KLD
        '''),
    "train.py": d('''
        import argparse

        import torch

        from losses import loss_function
        from models import VAE


        def train(model, optimizer, data, epoch, log_interval):
            model.train()
            train_loss = 0
            for batch_idx, x in enumerate(data):
                optimizer.zero_grad()
                recon, mu, logvar = model(x)
                loss = loss_function(recon, x, mu, logvar)
                loss.backward()
                train_loss += loss.item()
                optimizer.step()
                if batch_idx % log_interval == 0:
                    print(f"Train Epoch: {epoch} [{batch_idx}]\\tLoss: {loss.item() / len(x):.6f}")
            print(f"====> Epoch: {epoch} Average loss: {train_loss / (len(data) * 8):.4f}")


        def test(model, data):
            model.eval()
            test_loss = 0
            with torch.no_grad():
                for x in data:
                    recon, mu, logvar = model(x)
                    test_loss += loss_function(recon, x, mu, logvar).item()
            print(f"====> Test set loss: {test_loss / (len(data) * 8):.4f}")


        def main():
            parser = argparse.ArgumentParser(description="VAE")
            parser.add_argument("--epochs", type=int, default=2)
            parser.add_argument("--log-interval", type=int, default=2)
            args = parser.parse_args()
            torch.manual_seed(1)
            data = list(torch.rand(32, 20).split(8))
            model = VAE()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            for epoch in range(1, args.epochs + 1):
                train(model, optimizer, data, epoch, args.log_interval)
                test(model, data)


        if __name__ == "__main__":
            main()
        '''),
}

# 4. losses["total"] feeds a logged dict
CASES["losses-dict"] = {
    "models.py": MODELS,
    "losses.py": d('''
        import torch.nn.functional as F


        def compute_losses(model, logits, y, wd=1e-3):
            ce = F.cross_entropy(logits, y, reduction="none")
            reg = sum(p.pow(2).sum() for p in model.parameters())
            return {"total": ce + wd * reg, "reg": reg}
        '''),
    "train.py": (TRAIN_HEAD + d('''


        def evaluate(model, loader):
            with torch.no_grad():
                vals = [compute_losses(model, model(x), y)["total"].item() for x, y in loader]
            return sum(vals) / len(vals)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--steps", type=int, default=6)
            args = parser.parse_args()
            logging.basicConfig(level=logging.INFO)
            torch.manual_seed(0)
            model = MLP()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
            loader = batches()
            history = []
            for step in range(args.steps):
                x, y = loader[step % len(loader)]
                losses = compute_losses(model, model(x), y)
                optimizer.zero_grad()
                losses["total"].backward()
                optimizer.step()
                history.append({k: v.item() for k, v in losses.items()})
                log.info("step %d %s", step, history[-1])
            print(f"val {evaluate(model, loader):.4f}")


        if __name__ == "__main__":
            main()
        ''')).replace("from models import MLP", "from losses import compute_losses\nfrom models import MLP"),
}

# 5. (loss / accum).backward() then loss.item()
CASES["accum-item"] = {
    "models.py": MODELS,
    "train.py": TRAIN_HEAD + d('''


        def evaluate(model, criterion, loader):
            with torch.no_grad():
                return sum(criterion(model(x), y).mean().item() for x, y in loader) / len(loader)


        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--accum", type=int, default=2)
            parser.add_argument("--epochs", type=int, default=2)
            args = parser.parse_args()
            torch.manual_seed(0)
            model = MLP()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            loader = batches()
            for epoch in range(args.epochs):
                for i, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = torch.nn.functional.cross_entropy(out, y, reduction="none")
                    (loss / args.accum).backward()
                    if (i + 1) % args.accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                    print(f"epoch {epoch} it {i} loss {loss.item():.4f}")
                print(f"epoch {epoch} val {evaluate(model, torch.nn.functional.cross_entropy, loader):.4f}")


        if __name__ == "__main__":
            main()
        '''),
}

# 6. the model's forward returns (logits, loss) and an evaluation pass unpacks it too (nanoGPT)
CASES["model-tuple"] = {
    "model.py": d('''
        import torch.nn as nn
        import torch.nn.functional as F


        class TinyLM(nn.Module):
            def __init__(self, vocab=11, d=16):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.head = nn.Linear(d, vocab)

            def forward(self, idx, targets=None):
                logits = self.head(self.emb(idx))
                if targets is not None:
                    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
                else:
                    loss = None
                return logits, loss
        '''),
    "train.py": d('''
        import torch

        from model import TinyLM

        torch.manual_seed(0)
        data = torch.randint(0, 11, (64, 9))
        model = TinyLM()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        accum = 2


        @torch.no_grad()
        def estimate_loss():
            model.eval()
            losses = torch.zeros(4)
            for k in range(4):
                _, loss = model(data[k:k + 8, :-1], data[k:k + 8, 1:])
                losses[k] = loss.item()
            model.train()
            return losses.mean()


        for it in range(4):
            for micro in range(accum):
                x, y = data[micro::8, :-1], data[micro::8, 1:]
                logits, loss = model(x, y)
                loss = loss / accum
                loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            print(f"iter {it}: val loss {estimate_loss():.4f}")
        '''),
}


import pytest

# 7. seq2seq: the per-step losses of a reduction='none' criterion are summed into `loss = 0`
CASES["step-sum"] = {
    "engine.py": d('''
        import torch


        def train_epoch(model, criterion, optimizer, seqs):
            total = 0.0
            for x, y in seqs:
                optimizer.zero_grad()
                out = model(x)
                loss = 0
                for t in range(y.size(1)):
                    loss += criterion(out[:, t], y[:, t])
                loss.backward()
                optimizer.step()
                total += loss.item() / y.size(1)
            return total / len(seqs)


        @torch.no_grad()
        def evaluate(model, criterion, seqs):
            total = 0.0
            for x, y in seqs:
                out = model(x)
                loss = 0
                for t in range(y.size(1)):
                    loss += criterion(out[:, t], y[:, t])
                total += loss.item() / y.size(1)
            return total / len(seqs)
        '''),
    "train.py": d('''
        import torch

        from engine import evaluate, train_epoch

        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 4 * 5), torch.nn.Unflatten(1, (4, 5)))
        criterion = torch.nn.CrossEntropyLoss(ignore_index=0, reduction="none")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        seqs = [(torch.randn(6, 8), torch.randint(0, 5, (6, 4))) for _ in range(3)]
        for epoch in range(2):
            train_loss = train_epoch(model, criterion, optimizer, seqs)
            val_loss = evaluate(model, criterion, seqs)
            print(f"epoch {epoch} train {train_loss:.4f} val {val_loss:.4f}")
        '''),
}

from conftest import REPO, run_script

# the producer that covers every use: file and a snippet of its line
PRODUCER = {"eval-criterion": ("train.py", 'reduction="none"'), "eval-loss-fn": ("losses.py", "return"),
            "vae-kld": ("losses.py", "return BCE + KLD"), "losses-dict": ("losses.py", "return {"),
            "accum-item": ("train.py", 'reduction="none"'), "model-tuple": ("model.py", 'reduction="none"'),
            "step-sum": ("train.py", 'reduction="none"')}
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _crash(base, name):
    d = base / name
    d.mkdir()
    for f, t in CASES[name].items():
        (d / f).write_text(t)
    proc = run_script(d)
    (d / "crash.log").write_text(proc.stdout + proc.stderr)
    return d, proc


@pytest.fixture(scope="module")
def crashes(tmp_path_factory):
    base = tmp_path_factory.mktemp("uses")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(lambda n: _crash(base, n), CASES)))


def _tracefix(root, *args):
    return subprocess.run([sys.executable, "-m", "tracefix", *args, "--root", str(root), str(root / "crash.log")],
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=120)


@pytest.mark.parametrize("name", list(CASES))
def test_producer_first_and_no_safe_patch_leaves_a_use(name, crashes):
    root, proc = crashes[name]
    assert "grad can be implicitly created only for scalar outputs" in proc.stderr
    diag = json.loads(_tracefix(root, "--format", "json").stdout)["diagnoses"][0]
    first = diag["fix_sites"][0]
    rel, snippet = PRODUCER[name]
    assert (first["path"], snippet in first["code"]) == (rel, True), diag["fix_sites"]
    patches = diag["patches"]
    assert patches[0]["applicability"] == "safe"
    # every site whose fix leaves a use: its patches are never safe, and the reason names file:line
    for site in diag["fix_sites"][1:]:
        if "not enough" not in site["reason"]:
            continue
        mine = [p for p in patches if f"+++ b/{site['path']}" in p["diff"] and any(
            ln[1:].strip() == site["code"] for ln in p["diff"].splitlines() if ln.startswith("-") and ln[:3] != "---")]
        assert mine or site["kind"] == "loss-assignment"
        for p in mine:
            assert p["applicability"] == "insufficient" and ".py:" in p["reason"], p
    plain = _tracefix(root, "--format", "plain").stdout
    assert f"fix site:   {first['path']}:{first['line']}" in plain


@pytest.mark.parametrize("name", list(CASES))
def test_apply_then_the_program_runs_through_its_evaluation(name, crashes, tmp_path):
    src, _ = crashes[name]
    root = tmp_path / name
    shutil.copytree(src, root)
    applied = _tracefix(root, "--apply")
    assert applied.returncode == 0, applied.stderr
    after = run_script(root)
    assert after.returncode == 0, after.stderr[-800:]


RETURNED = {
    "trainer.py": d('''
        import torch


        class Trainer:
            def __init__(self, model, lr=0.05):
                self.model = model
                self.opt = torch.optim.SGD(model.parameters(), lr=lr)

            def train_step(self, x, y):
                self.opt.zero_grad()
                loss = (self.model(x) - y) ** 2
                loss.backward()
                self.opt.step()
                return loss
        '''),
    "train.py": d('''
        import torch

        from trainer import Trainer

        torch.manual_seed(0)
        trainer = Trainer(torch.nn.Linear(4, 1))
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        for step in range(3):
            loss = trainer.train_step(x, y)
            print(f"step {step} loss {loss.item():.4f}")
        '''),
}


def test_first_site_is_the_same_in_every_format_and_without_patches(tmp_path):
    """`return loss` after backward(): reducing only at backward() is insufficient, so the
    assignment is first, whether or not patches are computed (issue 22 item 2)."""
    for f, t in RETURNED.items():
        (tmp_path / f).write_text(t)
    proc = run_script(tmp_path)
    (tmp_path / "crash.log").write_text(proc.stdout + proc.stderr)
    want = "trainer.py:" + str(RETURNED["trainer.py"].splitlines().index("        loss = (self.model(x) - y) ** 2") + 1)
    for extra in ((), ("--no-patch",)):
        diag = json.loads(_tracefix(tmp_path, "--format", "json", *extra).stdout)["diagnoses"][0]
        assert f"{diag['fix_sites'][0]['path']}:{diag['fix_sites'][0]['line']}" == want
        first_line = _tracefix(tmp_path, "--format", "quickfix", *extra).stdout.splitlines()[0]
        assert f"/{want}:" in first_line and "fix here" in first_line
        assert f"fix site:   {want}" in _tracefix(tmp_path, "--format", "plain", *extra).stdout
    assert f"fix site:   {want}" in _tracefix(tmp_path, "--format", "rich").stdout


UNKNOWN_PRODUCER = {
    "model.py": CASES["model-tuple"]["model.py"].replace(
        'F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")',
        "(logits.softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1) - 1) ** 2"),
    "train.py": CASES["model-tuple"]["train.py"],
}


def test_a_loss_unpacked_from_a_model_that_eval_also_reads_gets_no_safe_call_site_patch(tmp_path):
    """No producer is recognised (a hand-written per-token loss in forward), but estimate_loss()
    unpacks the same model's loss and calls .item(): reducing at the training call site alone
    leaves that failing, so no patch there is `safe`, and the reason names the read."""
    for f, t in UNKNOWN_PRODUCER.items():
        (tmp_path / f).write_text(t)
    proc = run_script(tmp_path)
    assert "grad can be implicitly created only for scalar outputs" in proc.stderr
    (tmp_path / "crash.log").write_text(proc.stdout + proc.stderr)
    diag = json.loads(_tracefix(tmp_path, "--format", "json").stdout)["diagnoses"][0]
    read = UNKNOWN_PRODUCER["train.py"].splitlines().index("        losses[k] = loss.item()") + 1
    train_patches = [p for p in diag["patches"] if "+++ b/train.py" in p["diff"]]
    assert train_patches
    for p in train_patches:
        assert p["applicability"] != "safe", p
        assert f"train.py:{read}" in p["reason"], p
