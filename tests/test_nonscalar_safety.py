"""Nonscalar-backward options that give a variable a scalar are safe only when every later read of
that variable is served as well by a scalar (new user round: hard mining, masked LM, focal loss)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

HARD_MINING = '"""Binary classifier; keep every per-example loss of the epoch to find hard examples."""\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\ndef run_epoch(model, opt, loader):\n    seen = []\n    for xb, yb in loader:\n        logits = model(xb).squeeze(-1)\n        loss = F.binary_cross_entropy_with_logits(logits, yb, reduction="none")\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        seen.append(loss.detach())\n    per_example = torch.cat(seen)\n    return per_example.mean().item(), per_example.topk(3).indices.tolist()\n\n\ndef main():\n    torch.manual_seed(0)\n    x = torch.randn(32, 4)\n    y = (x.sum(1) > 0).float()\n    loader = list(zip(x.split(8), y.split(8)))\n    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for epoch in range(3):\n        mean_loss, hardest = run_epoch(model, opt, loader)\n        print(f"epoch {epoch} loss {mean_loss:.4f} hardest {hardest}")\n\n\nmain()\n'

MASKED_LM = '"""Tiny causal LM fine-tune on padded batches."""\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nPAD = 0\nVOCAB = 40\n\n\nclass TinyLM(nn.Module):\n    def __init__(self, vocab=VOCAB, dim=16):\n        super().__init__()\n        self.emb = nn.Embedding(vocab, dim, padding_idx=PAD)\n        self.rnn = nn.GRU(dim, dim, batch_first=True)\n        self.out = nn.Linear(dim, vocab)\n\n    def forward(self, ids):\n        h, _ = self.rnn(self.emb(ids))\n        return self.out(h)\n\n\ndef make_batch(bs=8, max_len=10):\n    lens = torch.randint(4, max_len + 1, (bs,))\n    ids = torch.randint(1, VOCAB, (bs, max_len))\n    ids[torch.arange(max_len)[None, :] >= lens[:, None]] = PAD\n    return ids\n\n\ntorch.manual_seed(0)\nmodel = TinyLM()\nopt = torch.optim.Adam(model.parameters(), lr=3e-3)\n\nfor step in range(4):\n    ids = make_batch()\n    inputs, targets = ids[:, :-1], ids[:, 1:]\n    logits = model(inputs)\n    mask = (targets != PAD).float()\n    token_loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), reduction="none")\n    loss = token_loss * mask.reshape(-1)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    print(f"step {step} loss {loss.sum().item() / mask.sum().item():.4f}")\n'

FOCAL_CRITERIONS = 'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass FocalLoss(nn.Module):\n    """Binary focal loss (Lin et al., 2017)."""\n\n    def __init__(self, alpha=0.25, gamma=2.0, reduction="none"):\n        super().__init__()\n        self.alpha = alpha\n        self.gamma = gamma\n        self.reduction = reduction\n\n    def forward(self, logits, targets):\n        bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")\n        p_t = torch.exp(-bce)\n        loss = self.alpha * (1 - p_t) ** self.gamma * bce\n        if self.reduction == "mean":\n            return loss.mean()\n        if self.reduction == "sum":\n            return loss.sum()\n        return loss\n'

FOCAL_TRAIN = 'import torch\nimport torch.nn as nn\n\nfrom criterions import FocalLoss\n\n\nclass Trainer:\n    def __init__(self, model, lr=1e-2):\n        self.model = model\n        self.criterion = FocalLoss(gamma=2.0)\n        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n        self.history = []\n\n    def train_step(self, x, y):\n        self.optimizer.zero_grad()\n        loss = self.criterion(self.model(x).squeeze(1), y)\n        loss.backward()\n        self.optimizer.step()\n        self.history.append(loss.detach())\n        return loss\n\n    def fit(self, x, y, steps=4):\n        for step in range(steps):\n            self.train_step(x, y)\n            print(f"step {step} loss {float(self.history[-1]):.5f}")\n\n\nif __name__ == "__main__":\n    torch.manual_seed(0)\n    x = torch.randn(8, 5)\n    y = (x[:, 0] > 0).float()\n    Trainer(nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))).fit(x, y)\n'

TORCH_FRAMES = (
    '  File "/usr/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward\n'
    '    torch.autograd.backward(\n'
    '  File "/usr/lib/python3.11/site-packages/torch/autograd/__init__.py", line 208, in _make_grads\n'
    '    raise RuntimeError(\n'
    'RuntimeError: grad can be implicitly created only for scalar outputs\n')


def diagnose(root: Path, files: dict, frames):
    """Write the project, a crash log through ``frames`` ((line, function) in train.py), run tracefix."""
    for name, text in files.items():
        (root / name).write_text(text)
    lines = files["train.py"].splitlines()
    log = "Traceback (most recent call last):\n" + "".join(
        f'  File "{root / "train.py"}", line {n}, in {fn}\n    {lines[n - 1].strip()}\n' for n, fn in frames)
    (root / "crash.log").write_text(log + TORCH_FRAMES)
    proc = subprocess.run([sys.executable, "-m", "tracefix", "--format", "json", "--root", str(root),
                           str(root / "crash.log")], capture_output=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(proc.stdout)["diagnoses"][0]


def by_diff(diag, needle):
    return [p for p in diag["patches"] if needle in p["diff"]]


# --- a scalar at the assignment / criterion / return breaks a later per-sample read ---------------
def test_hard_mining_keeps_per_sample_losses_so_only_backward_reduces(tmp_path):
    diag = diagnose(tmp_path, {"train.py": HARD_MINING}, [(32, "<module>"), (28, "main"), (13, "run_epoch")])
    first = diag["patches"][0]
    assert first["applicability"] == "safe" and "+        loss.mean().backward()" in first["diff"]
    at_assign = by_diff(diag, 'reduction="none").mean()') + by_diff(diag, 'reduction="none").sum()')
    assert len(at_assign) == 2
    for p in at_assign:
        assert p["applicability"] == "unsafe"
        assert "'loss' is also used per sample at train.py:15 (seen.append(loss.detach()))" in p["reason"]


def test_masked_lm_sum_of_the_vector_is_read_later(tmp_path):
    diag = diagnose(tmp_path, {"train.py": MASKED_LM}, [(41, "<module>")])
    first = diag["patches"][0]
    # loss = token_loss * mask: the average over the kept positions, as the script's own print does
    assert first["applicability"] == "safe"
    assert "+    (loss.sum() / mask.reshape(-1).sum().clamp(min=1)).backward()" in first["diff"]
    [plain] = by_diff(diag, "+    loss.mean().backward()")
    assert plain["applicability"] == "unsafe" and "zeroes out" in plain["reason"]
    [mean] = by_diff(diag, "+    loss = (token_loss * mask.reshape(-1)).mean()")
    assert mean["applicability"] == "unsafe" and "train.py:43" in mean["reason"]
    # loss.sum().item() reads a reduction of the vector: not "used as a scalar elsewhere"
    assert not any("used as a scalar elsewhere" in s["reason"] for s in diag["fix_sites"])


def test_focal_loss_with_a_none_default_is_not_fixed_since_nor_reduced_in_the_class(tmp_path):
    files = {"criterions.py": FOCAL_CRITERIONS, "train.py": FOCAL_TRAIN}
    diag = diagnose(tmp_path, files, [(32, "<module>"), (24, "fit"), (17, "train_step")])
    assert not any("fixed since" in n for n in diag["notes"]), diag["notes"]
    [in_class] = by_diff(diag, "+        return loss.mean()")
    assert in_class["applicability"] == "unsafe" and "on purpose" in in_class["reason"]
    assert "FocalLoss.forward()" in in_class["reason"]
    # the construction asks for the mean; history.append(loss.detach()) still reads the loss
    first = diag["patches"][0]
    assert 'FocalLoss(gamma=2.0, reduction="mean")' in first["diff"]
    assert first["applicability"] == "unsafe" and "train.py:19" in first["reason"]
    assert not any(p["applicability"] == "safe" for p in diag["patches"])


def test_focal_construction_is_the_safe_fix_when_the_loss_is_only_a_number_later(tmp_path):
    train = FOCAL_TRAIN.replace("self.history.append(loss.detach())", "self.history.append(loss.item())")
    diag = diagnose(tmp_path, {"criterions.py": FOCAL_CRITERIONS, "train.py": train},
                    [(32, "<module>"), (24, "fit"), (17, "train_step")])
    first = diag["patches"][0]
    assert first["applicability"] == "safe" and 'FocalLoss(gamma=2.0, reduction="mean")' in first["diff"]
    assert by_diff(diag, "+        return loss.mean()")[0]["applicability"] == "unsafe"


# --- the fixers on their own: one site, the reads after it ------------------------------------
def _propose(tmp_path, text, kind):
    from tracefix.patcher import propose
    from tracefix.records import Diagnosis, FixSite, Traceback

    (tmp_path / "train.py").write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "# FIX" in t)
    code = text.splitlines()[line - 1]
    col = code.index("=") + 2 if kind == "loss-assignment" else code.index("reduction")
    site = FixSite(path="train.py", line=line, code=code.strip(), col=col, kind=kind, score=1.0)
    diag = Diagnosis("nonscalar-backward", "t", 1.0, Traceback("RuntimeError", "m"), fix_sites=(site,))
    return propose(diag, tmp_path)


STEP = ("import torch.nn.functional as F\nfor x, y in data:\n{before}"
        "    loss = F.mse_loss(model(x), y, reduction='none')  # FIX\n    loss.backward()\n{after}")
FINE = ["    print(loss.item())\n", "    total += float(loss.detach())\n", "    print(f'{loss:.3f}')\n",
        "    logger.info('loss %s', loss)\n", "    stop = loss < 0.1\n", "    print(loss.mean().item())\n",
        "    del loss\n", "    loss = other\n    keep.append(loss)\n", ""]
PER_SAMPLE = ["    keep.append(loss.detach())\n", "    print(loss.sum().item())\n", "    worst = loss[0]\n",
              "    total = total + loss\n", "    store(loss)\n", "    v = loss.view(-1, 2)\n"]


@pytest.mark.parametrize("kind", ["loss-assignment", "criterion-reduction"])
@pytest.mark.parametrize("after", FINE)
def test_reducing_at_the_source_stays_safe_when_later_reads_are_numbers(tmp_path, kind, after):
    patches = _propose(tmp_path, STEP.format(before="", after=after), kind)
    assert patches[0].applicability == "safe", (after, patches[0].reason)


@pytest.mark.parametrize("kind", ["loss-assignment", "criterion-reduction"])
@pytest.mark.parametrize("after", PER_SAMPLE)
def test_reducing_at_the_source_is_unsafe_when_a_later_read_is_per_sample(tmp_path, kind, after):
    patches = _propose(tmp_path, STEP.format(before="", after=after), kind)
    assert patches and all(p.applicability == "unsafe" for p in patches), after
    assert "'loss' is also used per sample at train.py:5" in patches[0].reason, patches[0].reason


def test_a_read_earlier_in_the_loop_sees_the_previous_pass(tmp_path):
    text = STEP.format(before="    if step:\n        keep.append(loss)\n", after="")
    patches = _propose(tmp_path, text, "loss-assignment")
    assert all(p.applicability == "unsafe" for p in patches)
    assert "train.py:4 (keep.append(loss))" in patches[0].reason


# --- a stack of task losses: one entry per loss, not per sample (new user round 3) ---------------
STACKED = {
    "display": "import torch\nloss = torch.stack([cls_loss, 0.5 * reg_loss])\nloss.backward()\n",
    "named list": "import torch\nweighted = [w[k] * v for k, v in losses.items()]\ntotal = torch.stack(weighted)\n"
                  "total.backward()\n",
}


@pytest.mark.parametrize("name", sorted(STACKED))
def test_a_stack_of_losses_is_summed_not_averaged(tmp_path, name):
    from test_patcher import diag_for, site, write
    from tracefix.patcher import propose

    text = STACKED[name]
    write(tmp_path, text)
    line = len(text.splitlines())
    patches = propose(diag_for([site(line, "backward-receiver")]), tmp_path)
    first = patches[0]
    assert first.applicability == "safe" and ".sum().backward()" in first.files[0][2]
    mean = [p for p in patches if ".mean()" in p.files[0][2]]
    assert mean and all(p.applicability == "unsafe" and "number" in p.reason for p in mean)
    assert not any("ones_like" in p.files[0][2] for p in patches)


def test_a_stack_of_per_sample_losses_keeps_the_mean(tmp_path):
    from test_patcher import diag_for, site, write
    from tracefix.patcher import propose

    write(tmp_path, STACKED["display"])
    sites = [site(3, "backward-receiver"), site(2, "criterion-reduction", score=0.5)]
    patches = propose(diag_for(sites), tmp_path)
    assert patches[0].applicability == "safe" and ".mean().backward()" in patches[0].files[0][2]


def test_a_plain_vector_loss_keeps_the_mean(tmp_path):
    from test_patcher import diag_for, site, write
    from tracefix.patcher import propose

    write(tmp_path, "import torch\nloss = torch.cat([a, b])\nloss.backward()\n")
    patches = propose(diag_for([site(3, "backward-receiver")]), tmp_path)
    assert patches[0].applicability == "safe" and ".mean().backward()" in patches[0].files[0][2]


# --- a loss returned in a dict, and a masked loss (new user round 4) -----------------------------
LM_LOSS = ('import torch.nn.functional as F\n\n\ndef lm_loss(logits, targets):\n'
           '    tok = F.cross_entropy(logits.flatten(0, 1), targets.reshape(-1), reduction="none").view(targets.shape)\n'
           '    mask = (targets != 0).float()\n'
           '    return {"loss": tok * mask, "ntokens": mask.sum()}\n')
LM_TRAIN = ('import torch\nfrom lmloss import lm_loss\n\nfor step in range(3):\n'
            '    out = lm_loss(torch.randn(2, 5, 7, requires_grad=True), torch.randint(0, 7, (2, 5)))\n'
            '    out["loss"].backward()\n'
            '    print(f"step {step} loss {READ:.4f}")\n')


def _dict_patches(tmp_path, read):
    from test_patcher import diag_for, site, write
    from tracefix.patcher import propose
    from tracefix.records import Site
    from tracefix.record import replace

    write(tmp_path, LM_LOSS, "lmloss.py")
    write(tmp_path, LM_TRAIN.replace("READ", read))
    diag = replace(diag_for([site(7, "per-sample-return", "lmloss.py", col=4),
                             site(6, "backward-receiver", score=0.9, col=4)]),
                   crash_site=Site(path="train.py", line=6, code='out["loss"].backward()', col=4))
    return propose(diag, tmp_path)


def test_a_dict_return_reduces_its_loss_entry_never_the_dict(tmp_path):
    patches = _dict_patches(tmp_path, "out['loss'].mean().item()")
    at_return = [p for p in patches if p.files[0][0] == "lmloss.py"]
    assert at_return
    for p in at_return:
        assert '{"loss": tok * mask, "ntokens": mask.sum()}.' not in p.files[0][2]
    [kept] = [p for p in at_return if "clamp(min=1)" in p.files[0][2]]
    assert '{"loss": (tok * mask).sum() / mask.sum().clamp(min=1), "ntokens": mask.sum()}' in kept.files[0][2]
    assert kept.applicability == "safe", kept.reason
    # the mean at backward() also counts the padding
    [at_backward] = [p for p in patches if p.files[0][2].count('out["loss"].mean().backward()')]
    assert at_backward.applicability == "unsafe" and "'mask' at lmloss.py:7" in at_backward.reason


def test_a_returned_loss_read_again_per_sample_after_backward_is_unsafe_to_reduce_at_the_return(tmp_path):
    patches = _dict_patches(tmp_path, "out['loss'].sum().item() / out['ntokens'].item()")
    [kept] = [p for p in patches if "clamp(min=1)" in p.files[0][2]]
    assert kept.applicability == "unsafe" and "read again as per-sample values at train.py:7" in kept.reason


def test_a_dict_without_a_loss_entry_gets_no_reduction(tmp_path):
    from test_patcher import diag_for, site, write
    from tracefix.patcher import propose

    write(tmp_path, "def f(a, b):\n    return {'total': a * b, 'n': 3}\n", "lmloss.py")
    assert propose(diag_for([site(2, "per-sample-return", "lmloss.py", col=4)]), tmp_path) == ()


# --- .mean() of a criterion's per-sample losses is not its reduction='mean' (new user round 5) ----
SEG_MODULE = ('import torch.nn.functional as F\n\n\ndef seg_loss(logits, masks, w=None):\n'
              '    return F.cross_entropy(logits, masks, CRIT_ARGS reduction="none")\n')
SEG_TRAIN = ('from module import seg_loss\n\nfor step in range(2):\n    loss = seg_loss(logits, masks)\n'
             '    loss.backward()\n')


@pytest.mark.parametrize("args, said", [("ignore_index=255,", "takes ignore_index"), ("weight=w,", "class weights"),
                                        ("w,", "class weights"), ("", "")])
def test_the_mean_of_a_class_loss_with_ignored_targets_or_weights_is_unsafe(tmp_path, args, said):
    from test_patcher import diag_for, site, write
    from tracefix.patcher import propose

    module = SEG_MODULE.replace("CRIT_ARGS", args)
    write(tmp_path, module, "module.py")
    write(tmp_path, SEG_TRAIN)
    col = module.splitlines()[4].index("reduction")
    patches = propose(diag_for([site(5, "criterion-reduction", "module.py", col=col), site(4, "loss-assignment", col=11)]),
                      tmp_path)
    assert patches[0].applicability == "safe" and "reduction='mean'" in patches[0].summary
    [mean] = [p for p in patches if "loss = seg_loss(logits, masks).mean()" in p.files[0][2]]
    if said:
        assert mean.applicability == "unsafe" and said in mean.reason and "module.py:5" in mean.reason
    else:
        assert mean.applicability == "safe", mean.reason


# --- Hugging Face's compute_loss idiom: `return (loss, outputs) if return_outputs else loss` ------
HF_TRAINER = '''from transformers import Trainer
import torch.nn.functional as F


class WeightedTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = F.cross_entropy(outputs.logits, labels, reduction="none") * self.w[labels]
        return (loss, outputs) if return_outputs else loss


WeightedTrainer(model=model, args=args).train()
'''


def test_conditional_return_of_loss_and_outputs_is_reduced_where_loss_is_assigned(tmp_path):
    diag = diagnose(tmp_path, {"train.py": HF_TRAINER}, [(13, "<module>")])
    assert (diag["fix_sites"][0]["line"], diag["fix_sites"][0]["kind"]) == (9, "loss-assignment")
    first = diag["patches"][0]
    assert first["applicability"] == "safe", first
    assert '+        loss = (F.cross_entropy(outputs.logits, labels, reduction="none") * self.w[labels]).mean()' \
        in first["diff"]
    # the evaluation loop asks for (loss, outputs): `.mean()` on the whole conditional would call it on a tuple
    assert not [p for p in diag["patches"] if "else loss).mean()" in p["diff"] or "else loss).sum()" in p["diff"]]


def test_conditional_return_with_a_per_sample_read_before_it_is_not_safe_at_the_assignment(tmp_path):
    kept = HF_TRAINER.replace("        return (loss, outputs)",
                              "        self.hard.append(loss.detach())\n        return (loss, outputs)")
    diag = diagnose(tmp_path, {"train.py": kept}, [(14, "<module>")])
    at_assign = by_diff(diag, "self.w[labels]).mean()")
    assert at_assign and all(p["applicability"] == "unsafe" for p in at_assign)
    assert "self.hard.append(loss.detach())" in at_assign[0]["reason"]
