"""nonscalar-backward locate module: where an unreduced loss comes from, on small trees in tmp_path."""
from test_locator import NONSCALAR, TORCH_BACKWARD, first, line_of, run, user_frame, write


def _loss_module(tmp_path, body):
    write(tmp_path, "losses.py", """
        import torch.nn as nn
        import torch.nn.functional as F

        class Weighted(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.w = w

            def forward(self, logits, target):
        """ + body)
    write(tmp_path, "train.py", """
        from losses import Weighted
        crit = Weighted(w)
        for step in range(3):
            loss = crit(model(x), y)
            loss.backward()
            print(f"loss {loss.item():.3f}")
        """)
    return run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"),
                                       *TORCH_BACKWARD], NONSCALAR)


def test_loss_module_returning_weighted_per_sample_values_is_the_fix_site(tmp_path):
    out = _loss_module(tmp_path, """
                nll = F.cross_entropy(logits, target, reduction="none")
                return self.w[target] * nll
        """)
    assert first(out) == ("losses.py", line_of(tmp_path, "losses.py", "return self.w"), "per-sample-return")
    assert "Weighted.forward()" in out.fix_sites[0].reason
    # reduction='mean' would not help (w[target] * scalar is still a vector): not offered
    assert "criterion-reduction" not in [s.kind for s in out.fix_sites]


def test_loss_module_that_reduces_is_not_blamed(tmp_path):
    out = _loss_module(tmp_path, """
                nll = F.cross_entropy(logits, target, reduction="none")
                return (self.w[target] * nll).mean()
        """)
    assert "per-sample-return" not in [s.kind for s in out.fix_sites]
    assert any("already reduces" in n for n in out.notes)


def test_project_function_without_unreduced_criterion_is_not_a_loss_function(tmp_path):
    write(tmp_path, "train.py", """
        def predict(model, x):
            return model(x) * 2

        loss = predict(model, x)
        loss.backward()
        print(loss.item())
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="<module>"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert "per-sample-return" not in [s.kind for s in out.fix_sites]
    assert first(out) == ("train.py", 4, "loss-assignment")      # used as a number: fix where it is made


def test_a_per_sample_loss_scaled_by_a_number_still_names_the_criterion(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn as nn
        ACCUM = 4
        criterion = nn.HuberLoss(reduction="none", delta=0.5)
        def train_epoch(model, xs, ys):
            for xb, yb in zip(xs, ys):
                loss = criterion(model(xb), yb) / ACCUM
                loss.backward()
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="train_epoch"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", 'reduction="none"'), "criterion-reduction")
    # a tensor scale (a per-sample weight) is not a number: the criterion alone would not fix it
    (tmp_path / "train.py").write_text((tmp_path / "train.py").read_text().replace("/ ACCUM", "* weights"))
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="train_epoch"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert "criterion-reduction" not in [s.kind for s in out.fix_sites]
