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


def test_a_closure_handed_to_optimizer_step_returns_its_loss_as_a_number(tmp_path):
    """LBFGS reads float(closure()): the closure's `return loss` does not keep the per-sample
    values alive, so the module-level criterion the closure calls is the fix site."""
    write(tmp_path, "train.py", """
        import torch.nn as nn
        criterion = nn.MSELoss(reduction="none")
        for i in range(2):
            def closure():
                optimizer.zero_grad()
                loss = criterion(seq(x), y)
                loss.backward()
                return loss
            optimizer.step(closure)
        """)
    frames = [user_frame(tmp_path, "train.py", "loss.backward", func="closure"), *TORCH_BACKWARD]
    out = run(tmp_path, "nonscalar", frames, NONSCALAR)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", 'reduction="none"'), "criterion-reduction")
    # handed elsewhere than to step(), the returned vector may be used per sample: no criterion claim
    (tmp_path / "train.py").write_text((tmp_path / "train.py").read_text().replace(
        "optimizer.step(closure)", "history.append(closure())"))
    out = run(tmp_path, "nonscalar", frames, NONSCALAR)
    assert "criterion-reduction" not in [s.kind for s in out.fix_sites]


def test_a_criterion_made_by_a_project_helper_is_fixed_in_the_helper(tmp_path):
    write(tmp_path, "losses.py", """
        import torch.nn as nn

        def make_criterion():
            return nn.BCELoss(reduction="none")
        """)
    write(tmp_path, "train.py", """
        from losses import make_criterion

        def train(model, loader):
            criterion = make_criterion()
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()

        def test(model, loader):
            criterion = make_criterion()
            total = 0.0
            for x, y in loader:
                total += criterion(model(x), y).item()
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="train"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("losses.py", line_of(tmp_path, "losses.py", 'reduction="none"'), "criterion-reduction")
    # test()'s .item() reads another criterion from the same helper: reducing in train() leaves it failing
    assignment = next(s for s in out.fix_sites if s.kind == "loss-assignment")
    assert assignment.uncovered and "train.py:" + str(line_of(tmp_path, "train.py", "total +=")) in assignment.uncovered
    # a helper returning a reducing criterion is not blamed
    (tmp_path / "losses.py").write_text((tmp_path / "losses.py").read_text().replace('reduction="none"', ""))
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="train"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert "criterion-reduction" not in [s.kind for s in out.fix_sites]


def test_outputs_loss_is_followed_into_the_models_forward(tmp_path):
    """`outputs = model(**batch); loss = outputs.loss` with the model built by from_config: the
    criterion inside forward, whose loss= goes into the returned output object."""
    write(tmp_path, "modeling.py", """
        import torch.nn as nn

        class Output:
            def __init__(self, loss=None, logits=None):
                self.loss, self.logits = loss, logits

        class LM(nn.Module):
            @classmethod
            def from_config(cls, config):
                return cls()

            def forward(self, input_ids, labels=None):
                logits = self.head(input_ids)
                loss = None
                if labels is not None:
                    loss_fct = nn.CrossEntropyLoss(reduction="none")
                    loss = loss_fct(logits.view(-1, 5), labels.view(-1))
                return Output(loss=loss, logits=logits)
        """)
    write(tmp_path, "train.py", """
        from modeling import LM

        def main(config, loader):
            model = LM.from_config(config)
            total_loss = 0
            for batch in loader:
                outputs = model(**batch)
                loss = outputs.loss
                total_loss += loss.detach().float()
                loss = loss / 4
                loss.backward()
            print(total_loss.item())
        """)
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="main"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert first(out) == ("modeling.py", line_of(tmp_path, "modeling.py", 'reduction="none"'), "criterion-reduction")
    # another field of the output is not the loss
    (tmp_path / "train.py").write_text((tmp_path / "train.py").read_text().replace("outputs.loss", "outputs.logits"))
    out = run(tmp_path, "nonscalar", [user_frame(tmp_path, "train.py", "loss.backward", func="main"),
                                      *TORCH_BACKWARD], NONSCALAR)
    assert "criterion-reduction" not in [s.kind for s in out.fix_sites]
