"""Evidence from the witness outranks inference (tracefix/locator/evidence.py), on small trees."""
from tracefix.knowledge import load_entries
from tracefix.locator import locate
from tracefix.records import Diagnosis, Evidence, EvidenceSite, Frame, Traceback

from test_locator import INPLACE, TORCH_BACKWARD, SCALER_FRAMES, FP16, line_of, user_frame, write

ENTRIES = {e.locate: e for e in load_entries()}


def located(root, family, frames, message, evidence, fields=(), exc="RuntimeError"):
    tb = Traceback(exc_type=exc, message=message, frames=tuple(frames), evidence=evidence)
    d = Diagnosis(entry_id="x", title="x", confidence=1.0, traceback=tb, fields=fields)
    return locate(d, ENTRIES[family], root, search=True)


def site(root, role, rel, needle):
    ln = line_of(root, rel, needle)
    code = (root / rel).read_text().splitlines()[ln - 1].strip()
    return EvidenceSite(role=role, path=f"/remote/proj/{rel}", line=ln, code=code)


TWO_WRITES = """
    import torch
    class Net(torch.nn.Module):
        def forward(self, x):
            h = torch.tanh(x)
            g = torch.tanh(x * 2)
            h.mul_(2.0)
            g.add_(1.0)
            return h + g
    """


def test_witnessed_write_wins_over_an_equally_plausible_one(tmp_path):
    write(tmp_path, "net.py", TWO_WRITES)
    write(tmp_path, "train.py", "from net import Net\nloss = Net()(x).sum()\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"), *TORCH_BACKWARD]
    msg = INPLACE.format(node="TanhBackward0")
    fields = (("node", "Tanh"),)
    plain = located(tmp_path, "inplace", frames, msg, None, fields)
    assert {(s.path, s.line) for s in plain.fix_sites[:2]} == {("net.py", 6), ("net.py", 7)}
    ev = Evidence(kind="inplace-write", summary="'g' was changed in place by add_",
                  sites=(site(tmp_path, "write", "net.py", "g.add_"),))
    out = located(tmp_path, "inplace", frames, msg, ev, fields)
    assert (out.fix_sites[0].path, out.fix_sites[0].line, out.fix_sites[0].kind) == ("net.py", 7, "inplace-method")
    assert out.fix_sites[0].reason.startswith("Confirmed by the witness.")
    assert out.fix_sites[1].score < 0.5          # the other write is contradicted


def test_evidence_line_becomes_a_fix_site_when_the_source_alone_finds_nothing(tmp_path):
    write(tmp_path, "blocks.py", """
        import torch.nn as nn
        def make(kind):
            table = {"relu": nn.ReLU}
            return table[kind](inplace=True)
        """)
    write(tmp_path, "train.py", "loss = model(x).sum()\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"), *TORCH_BACKWARD]
    ev = Evidence(kind="inplace-write", summary="'h' was changed in place by relu_ in act (ReLU)",
                  sites=(site(tmp_path, "construct", "blocks.py", "inplace=True"),))
    out = located(tmp_path, "inplace", frames, INPLACE.format(node="SigmoidBackward0"), ev, (("node", "Sigmoid"),))
    top = out.fix_sites[0]
    assert (top.path, top.line, top.kind) == ("blocks.py", 4, "inplace-kwarg")
    assert "Seen by the witness" in top.reason


def test_a_derived_site_keeps_its_place_above_the_witnessed_cast(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        model = Net()
        model.half()
        other = Frozen().half()
        scaler.step(opt)
        """)
    frames = [user_frame(tmp_path, "train.py", "scaler.step", func="<module>"), *SCALER_FRAMES]
    ev = Evidence(kind="half-params", summary="parameters became float16 at train.py:3",
                  sites=(site(tmp_path, "cast", "train.py", "model.half()"),))
    out = located(tmp_path, "fp16-params", frames, FP16, ev, exc="ValueError")
    assert (out.fix_sites[0].path, out.fix_sites[0].line) == ("train.py", 3)
    assert all(s.score < 0.5 for s in out.fix_sites if s.line == 4)


def test_evidence_from_files_outside_root_changes_nothing(tmp_path):
    write(tmp_path, "net.py", TWO_WRITES)
    write(tmp_path, "train.py", "from net import Net\nloss = Net()(x).sum()\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"), *TORCH_BACKWARD]
    ev = Evidence(kind="inplace-write", summary="elsewhere",
                  sites=(EvidenceSite(role="write", path="/elsewhere/lib.py", line=3, code="y.add_(1)"),))
    msg, fields = INPLACE.format(node="TanhBackward0"), (("node", "Tanh"),)
    assert located(tmp_path, "inplace", frames, msg, ev, fields).fix_sites == \
        located(tmp_path, "inplace", frames, msg, None, fields).fix_sites


def test_nonscalar_family_order_stands_when_the_witness_names_a_creator_line(tmp_path):
    write(tmp_path, "trainer.py", """
        import torch.nn.functional as F
        def compute_loss(model, batch):
            logp = F.log_softmax(model(batch["x"]), dim=-1)
            nll = -logp.gather(-1, batch["y"].unsqueeze(-1)).squeeze(-1)
            return nll
        """)
    write(tmp_path, "train.py", "from trainer import compute_loss\nloss = compute_loss(m, b)\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"), *TORCH_BACKWARD]
    ev = Evidence(kind="nonscalar-loss", summary="the value passed to backward() has shape [16]",
                  sites=(site(tmp_path, "creator", "trainer.py", "nll = -logp"),))
    from test_locator import NONSCALAR
    out = located(tmp_path, "nonscalar", frames, NONSCALAR, ev)
    top = out.fix_sites[0]
    assert (top.path, top.line, top.kind) == ("trainer.py", 5, "per-sample-return")
    assert all(s.line != 4 or s.path != "trainer.py" for s in out.fix_sites)   # no site made up at the creator


def test_a_witnessed_write_inside_a_block_confirms_the_block(tmp_path):
    write(tmp_path, "train.py", """
        import torch
        for step in range(5):
            loss = critic(real).mean()
            with torch.no_grad():
                for p in critic.parameters():
                    p.clamp_(-0.01, 0.01)
            loss.backward()
        """)
    from test_locator import LEAF
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"), *TORCH_BACKWARD]
    ev = Evidence(kind="param-update", summary="parameter changed by clamp_",
                  sites=(site(tmp_path, "write", "train.py", "p.clamp_"),))
    out = located(tmp_path, "inplace", frames, LEAF, ev)
    assert (out.fix_sites[0].path, out.fix_sites[0].line) == ("train.py", 4)
    assert out.fix_sites[0].reason.startswith("Confirmed by the witness.")


CONFIG_FLAG = """
    import torch.nn as nn
    def mlp_stage(width, inplace):
        return nn.Sequential(
            nn.Linear(width, width),
            nn.Sigmoid(),
            nn.Hardtanh(0.0, 0.9, inplace=inplace),
        )
    """


def test_a_module_built_inplace_through_a_flag_is_the_fix_site_when_witnessed(tmp_path):
    write(tmp_path, "blocks.py", CONFIG_FLAG)
    write(tmp_path, "train.py", "loss = model(x).sum()\nloss.backward()\n")
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"), *TORCH_BACKWARD]
    msg = INPLACE.format(node="SigmoidBackward0")
    built = site(tmp_path, "construct", "blocks.py", "inplace=inplace")
    ev = Evidence(kind="inplace-write", summary="changed in place by hardtanh (nn.Hardtanh(inplace=True))",
                  sites=(EvidenceSite(role="construct", path=built.path, line=built.line, code=built.code,
                                      detail="nn.Hardtanh(inplace=True) built here"),))
    out = located(tmp_path, "inplace", frames, msg, ev, (("node", "Sigmoid"),))
    first = out.fix_sites[0]
    assert (first.path, first.line, first.kind) == ("blocks.py", built.line, "inplace-kwarg")
    # without the witness saying it was built in place, a flag proves nothing
    quiet = Evidence(kind="inplace-write", summary="changed in place by hardtanh",
                     sites=(EvidenceSite(role="construct", path=built.path, line=built.line, code=built.code,
                                         detail="nn.Hardtanh built here"),))
    out = located(tmp_path, "inplace", frames, msg, quiet, (("node", "Sigmoid"),))
    assert not any(s.kind == "inplace-kwarg" for s in out.fix_sites)


PRUNER = """
    import torch
    class Pruner:
        @torch.no_grad()
        def enforce(self):
            for name, p in self.model.named_parameters():
                p[~self.masks[name]] = 0.0
    """


def test_a_parameter_written_in_a_helper_moves_the_helpers_call_not_the_write(tmp_path):
    write(tmp_path, "callbacks.py", PRUNER)
    write(tmp_path, "train.py", """
        def train(model, pruner, opt):
            for x, y in data:
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                pruner.enforce()
                loss.backward()
                opt.step()
        """)
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="train"), *TORCH_BACKWARD]
    ev = Evidence(kind="param-update", summary="parameter 2.weight was changed in place by __setitem__",
                  sites=(site(tmp_path, "write", "callbacks.py", "p[~self.masks"),
                         site(tmp_path, "caller", "train.py", "pruner.enforce()"),
                         site(tmp_path, "backward", "train.py", "loss.backward()")))
    out = located(tmp_path, "inplace", frames, INPLACE.format(node="AsStrided"), ev, (("node", "AsStrided"),))
    first = out.fix_sites[0]
    assert (first.path, first.line, first.kind) == (
        "train.py", line_of(tmp_path, "train.py", "pruner.enforce()"), "param-update-before-backward")
    assert out.fix_sites[1].path == "callbacks.py"
