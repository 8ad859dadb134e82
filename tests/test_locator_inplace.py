"""inplace-modification locator: value tracing patterns on small trees (issue 10), with look-alikes
that must not be ranked first."""
from __future__ import annotations

from test_locator import INPLACE, LEAF, TORCH_BACKWARD, first, line_of, run, user_frame, write

from tracefix.locator import op_family

VIEW = INPLACE.replace("version 1; expected version 0", "version 2; expected version 1")


def backward_frames(root, rel="train.py", needle="loss.backward()", func="<module>"):
    return [user_frame(root, rel, needle, func=func), *TORCH_BACKWARD]


def msg(node):
    return INPLACE.format(node=node), (("node", node),)


def test_inplace_variant_backward_names_its_family():
    assert op_family("Elu1") == op_family("EluBackward1") == "elu"
    assert op_family("LeakyReluBackward1") == "leakyrelu"


# -- modules built by factories, registries and containers -------------------------------------
PREACT = """
    import torch.nn as nn

    def make_act():
        return nn.ReLU(inplace=True)

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.shortcut = nn.Linear(d, d)
            self.fc = nn.Linear(d, d)
            self.act = make_act()

        def forward(self, x):
            identity = self.shortcut(x)
            out = self.fc(self.act(x))
            return out + identity
    """


def test_factory_module_rewrites_an_input_a_linear_saved(tmp_path):
    write(tmp_path, "layers.py", PREACT)
    write(tmp_path, "train.py", "from layers import Block\nmodel = Block(4)\nloss = model(x).sum()\nloss.backward()\n")
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("layers.py", line_of(tmp_path, "layers.py", "inplace=True"), "inplace-kwarg")
    assert "already used" in out.fix_sites[0].reason


def test_factory_module_on_a_fresh_value_is_not_first(tmp_path):
    # the in-place ReLU here only rewrites a Linear output nobody else read (harmless); the relu
    # output changed by `r += 1` is the culprit
    write(tmp_path, "layers.py", """
        import torch
        import torch.nn as nn

        def make_act():
            return nn.ReLU(inplace=True)

        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.act = make_act()

            def forward(self, x):
                h = self.fc(x)
                out = self.act(h)
                r = torch.relu(out)
                r += 1
                return r
        """)
    write(tmp_path, "train.py", "from layers import Block\nmodel = Block(4)\nloss = model(x).sum()\nloss.backward()\n")
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("layers.py", line_of(tmp_path, "layers.py", "r += 1"), "inplace-augassign")


def test_registry_lookup_through_a_builder_in_another_file(tmp_path):
    write(tmp_path, "registry.py", """
        import torch.nn as nn
        ACTS = {"relu": nn.ReLU, "elu": nn.ELU}

        def build_act(cfg):
            return ACTS[cfg.act](inplace=True)
        """)
    write(tmp_path, "train.py", """
        import torch
        import torch.nn as nn
        from registry import build_act

        class Gate(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.gate = nn.Linear(4, 4)
                self.act = build_act(cfg)

            def forward(self, x):
                h = self.proj(x)
                t = torch.sigmoid(self.gate(h))
                return t * self.act(h)

        model = Gate(cfg)
        loss = model(x).sum()
        loss.backward()
        """)
    message, fields = msg("Elu1")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("registry.py", 5, "inplace-kwarg")


MULTI_HEAD = """
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Linear(4, 4)
            self.heads = nn.ModuleDict({
                "a": nn.Linear(4, 2),
                "b": nn.Sequential(nn.ReLU(inplace=True), nn.Linear(4, 1)),
            })

        def forward(self, x):
            feats = self.trunk(x)
            return {k: head(feats) for k, head in self.heads.items()}
    """


def test_moduledict_iterated_in_a_comprehension(tmp_path):
    write(tmp_path, "model.py", MULTI_HEAD)
    write(tmp_path, "train.py", "from model import Net\nnet = Net()\nloss = net(x)['a'].sum()\nloss.backward()\n")
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", "inplace=True"), "inplace-kwarg")


def test_modulelist_indexing(tmp_path):
    write(tmp_path, "model.py", """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Hardtanh(inplace=True)])
                self.skip = nn.Linear(4, 4)

            def forward(self, x):
                h = self.layers[0](x)
                s = self.skip(h)
                return s + self.layers[1](h)
        """)
    write(tmp_path, "train.py", "from model import Net\nnet = Net()\nloss = net(x).sum()\nloss.backward()\n")
    message, fields = msg("Hardtanh")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", "Hardtanh(inplace=True)"), "inplace-kwarg")


def test_sequential_inplace_after_a_block_that_ends_in_relu(tmp_path):
    write(tmp_path, "train.py", """
        import torch.nn as nn
        import torch.nn.functional as F

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 3, 3)

            def forward(self, x):
                return F.relu(self.conv(x))

        def build():
            return nn.Sequential(
                nn.Linear(4, 4),
                nn.ReLU(inplace=True),
                Block(),
                nn.ReLU(inplace=True),
            )

        model = build()
        loss = model(x).sum()
        loss.backward()
        """)
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    # the ReLU after the Linear (which saves its input, not its output) is no candidate
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "inplace=True", nth=1), "inplace-kwarg")
    assert line_of(tmp_path, "train.py", "inplace=True", nth=0) not in [s.line for s in out.fix_sites]


# -- values followed into helpers ------------------------------------------------------------------
def test_tensor_passed_to_a_no_grad_helper_that_writes_it(tmp_path):
    write(tmp_path, "metrics.py", """
        import torch

        @torch.no_grad()
        def cosine(z):
            z.div_(z.norm(dim=1, keepdim=True))
            return (z @ z.T).mean().item()

        @torch.no_grad()
        def spread(z):
            z = z / z.norm(dim=1, keepdim=True)
            return z.std().item()
        """)
    write(tmp_path, "train.py", """
        import torch.nn as nn
        from metrics import cosine, spread
        proj = nn.Linear(4, 4)
        for step in range(3):
            za = proj(x)
            loss = (za ** 2).mean()
            s = spread(za)
            c = cosine(za)
            loss.backward()
        """)
    message, fields = msg("Addmm")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("metrics.py", line_of(tmp_path, "metrics.py", "z.div_"), "inplace-method")
    # the value was made in train.py: the reason names that file with the line (issue 22 item 7)
    made = line_of(tmp_path, "train.py", "za = proj(x)")
    assert f"train.py:{made}" in out.fix_sites[0].reason and f"line {made})" not in out.fix_sites[0].reason
    assert "proj (nn.Linear)" in out.fix_sites[0].reason


def test_reason_names_the_module_not_the_op(tmp_path):
    # issue 12, 7b: "the output of mm" said nothing; the module attribute and its class do
    write(tmp_path, "model.py", """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, x):
                h = self.proj(x)
                y = h * h
                h.add_(1)
                return y
        """)
    write(tmp_path, "train.py", "from model import Net\nnet = Net()\nloss = net(x).sum()\nloss.backward()\n")
    message, fields = msg("AddmmBackward0")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", "h.add_(1)"), "inplace-method")
    reason = out.fix_sites[0].reason
    assert "the output of self.proj (nn.Linear)" in reason and "output of mm" not in reason


# -- parameters changed between forward and backward ----------------------------------------------
def test_clip_helper_in_another_file_between_forward_and_backward(tmp_path):
    write(tmp_path, "wutils.py", """
        import torch

        @torch.no_grad()
        def clip_weights(module, c):
            for p in module.parameters():
                p.clamp_(-c, c)

        def clip_grads(module, c):
            torch.nn.utils.clip_grad_norm_(module.parameters(), c)
        """)
    write(tmp_path, "train.py", """
        from wutils import clip_grads, clip_weights
        for step in range(3):
            c_loss = critic(x).mean()
            clip_grads(critic, 1.0)
            clip_weights(critic, 0.01)
            opt.zero_grad()
            c_loss.backward()
            opt.step()
        """)
    out = run(tmp_path, "inplace", backward_frames(tmp_path, needle="c_loss.backward()"),
              VIEW.format(node="AsStrided"), (("node", "AsStrided"),))
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "clip_weights(critic"),
                          "param-update-before-backward")
    reason = out.fix_sites[0].reason
    assert "clip_weights(critic, 0.01)" in reason and "c_loss.backward()" in reason and "wutils.py" in reason
    # gradient clipping changes .grad, not the parameters
    assert line_of(tmp_path, "train.py", "clip_grads(") not in [s.line for s in out.fix_sites]


def test_method_stepping_an_optimizer_between_two_backwards(tmp_path):
    write(tmp_path, "trainer.py", """
        import torch

        class Trainer:
            def __init__(self, actor, critic):
                self.opt_a = torch.optim.Adam(actor.parameters())
                self.opt_c = torch.optim.Adam(critic.parameters())

            def log(self):
                print("ok")

            def update_critic(self):
                self.opt_c.step()
        """)
    write(tmp_path, "train.py", """
        from trainer import Trainer
        trainer = Trainer(actor, critic)
        for step in range(3):
            q = critic(s, actor(s))
            c_loss = (q - r).pow(2).mean()
            c_loss.backward(retain_graph=True)
            trainer.log()
            trainer.update_critic()
            a_loss = -q.mean()
            a_loss.backward()
        """)
    out = run(tmp_path, "inplace", backward_frames(tmp_path, needle="a_loss.backward()"),
              VIEW.format(node="AsStrided"), (("node", "AsStrided"),))
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "trainer.update_critic()"),
                          "param-step-before-backward")
    assert line_of(tmp_path, "train.py", "trainer.log()") not in [s.line for s in out.fix_sites]


def test_decay_loop_over_a_list_of_parameters_without_a_node(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        class T:
            def __init__(self, model):
                self.model = model
                self.decay = [p for n, p in model.named_parameters() if n.endswith("weight")]

            @torch.no_grad()
            def decay_weights(self):
                for p in self.decay:
                    p.mul_(0.99)

            def step(self, x):
                loss = self.model(x).sum()
                self.decay_weights()
                loss.backward()
        """)
    frames = backward_frames(tmp_path, func="step")
    out = run(tmp_path, "inplace", frames, LEAF)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "self.decay_weights()"),
                          "param-update-before-backward")


def test_update_after_backward_is_no_candidate(tmp_path):
    write(tmp_path, "train.py", """
        from wutils import clip_weights
        for step in range(3):
            c_loss = critic(x).mean()
            c_loss.backward()
            clip_weights(critic, 0.01)
        """)
    write(tmp_path, "wutils.py", """
        def clip_weights(module, c):
            for p in module.parameters():
                p.data.clamp_(-c, c)
        """)
    out = run(tmp_path, "inplace", backward_frames(tmp_path, needle="c_loss.backward()"),
              VIEW.format(node="AsStrided"), (("node", "AsStrided"),))
    assert all(s.kind != "param-update-before-backward" for s in out.fix_sites)


# -- a buffer written in place (no grad_fn: no "output k of" in the message) -----------------------
def test_out_into_a_registered_buffer(tmp_path):
    write(tmp_path, "layers.py", """
        import torch
        import torch.nn as nn

        class Noise(nn.Module):
            def __init__(self, shape):
                super().__init__()
                self.register_buffer("noise", torch.empty(shape))
                self.scale = torch.ones(shape, requires_grad=True)

            def forward(self, x):
                self.scale.mul_(1.0)
                return x * torch.normal(1.0, 0.1, x.shape, out=self.noise)
        """)
    write(tmp_path, "train.py", "from layers import Noise\nm = Noise((2, 2))\nloss = m(x).sum()\nloss.backward()\n")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), LEAF)
    assert first(out) == ("layers.py", line_of(tmp_path, "layers.py", "out=self.noise"), "inplace-out")
    # a tensor created with requires_grad=True is no buffer
    assert line_of(tmp_path, "layers.py", "self.scale.mul_") not in [s.line for s in out.fix_sites]


def test_anomaly_frame_that_saved_an_input(tmp_path):
    # the forward trace points at the Linear that saved x; the later in-place write of x is the culprit,
    # not the look-alike in-place write of a fresh value next to it
    write(tmp_path, "layers.py", PREACT.replace("out = self.fc(self.act(x))",
                                                "out = self.fc(x)\n            y = torch.relu(out)\n"
                                                "            y.add_(1)\n            self.act(x)")
          .replace("import torch.nn as nn", "import torch\n    import torch.nn as nn"))
    write(tmp_path, "train.py", "from layers import Block\nmodel = Block(4)\nloss = model(x).sum()\nloss.backward()\n")
    anomaly = [user_frame(tmp_path, "layers.py", "identity = self.shortcut(x)", func="forward")]
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields, anomaly=anomaly)
    assert first(out) == ("layers.py", line_of(tmp_path, "layers.py", "inplace=True"), "inplace-kwarg")
    assert "anomaly" in out.fix_sites[0].reason


def test_anomaly_note_promises_candidates_only_when_there_are_some(tmp_path):
    # issue 22 item 6: the anomaly frame is explained by nothing, and nothing else was found either
    write(tmp_path, "layers.py", """
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return self.fc(x).relu()
        """)
    write(tmp_path, "train.py", "from layers import Head\nmodel = Head(4)\nloss = model(x).sum()\nloss.backward()\n")
    anomaly = [user_frame(tmp_path, "layers.py", "return self.fc(x).relu()", func="forward")]
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields, anomaly=anomaly)
    note = next(n for n in out.notes if "anomaly-mode trace" in n)
    assert not out.fix_sites and "no other candidate was found" in note and "are listed" not in note
    # with a candidate elsewhere, the note says so
    (tmp_path / "layers.py").write_text((tmp_path / "layers.py").read_text() + "\n\nACT = nn.ReLU(inplace=True)\n")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields, anomaly=anomaly)
    note = next(n for n in out.notes if "anomaly-mode trace" in n)
    assert out.fix_sites and "other candidates are listed" in note


def test_running_statistic_ranks_below_a_buffer_that_is_used(tmp_path):
    write(tmp_path, "layers.py", """
        import torch
        import torch.nn as nn

        class Norm(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.register_buffer("running", torch.zeros(d))
                self.register_buffer("mask", torch.ones(d))

            def forward(self, x):
                self.running.mul_(0.9).add_(x.mean(0).detach(), alpha=0.1)
                y = x * self.mask
                self.mask.bernoulli_(0.9)
                return y
        """)
    write(tmp_path, "train.py", "from layers import Norm\nm = Norm(2)\nloss = m(x).sum()\nloss.backward()\n")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), LEAF)
    assert first(out) == ("layers.py", line_of(tmp_path, "layers.py", "self.mask.bernoulli_"), "inplace-method")


def test_update_in_a_function_that_receives_the_loss(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        def clip(model):
            with torch.no_grad():
                for p in model.parameters():
                    p.clamp_(-1, 1)

        def backward_step(model, loss):
            clip(model)
            loss.backward()

        backward_step(net, net(x).sum())
        """)
    frames = [user_frame(tmp_path, "train.py", "backward_step(net", func="<module>"),
              user_frame(tmp_path, "train.py", "loss.backward()", func="backward_step"), *TORCH_BACKWARD]
    out = run(tmp_path, "inplace", frames, VIEW.format(node="AsStrided"), (("node", "AsStrided"),))
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "clip(model)", nth=1), "param-update-before-backward")


# -- a step between two backwards, when the saved tensor is a view of a weight (AsStrided) ----------
KD = """
    import torch
    import torch.nn.functional as F

    def train_step(x, y):
        s_logits = student(x)
        optimizer.zero_grad()
        ce = F.cross_entropy(s_logits, y)
        ce.backward(retain_graph=True)
        optimizer.step()
        kd = F.kl_div(F.log_softmax(s_logits, -1), t, reduction="batchmean")
        (0.7 * kd).backward()
        optimizer.step()
    """


def test_a_step_between_two_backwards_is_found_when_the_saved_tensor_is_a_weight_view(tmp_path):
    write(tmp_path, "train.py", KD)
    message, fields = msg("AsStrided")
    frames = backward_frames(tmp_path, needle="(0.7 * kd).backward()", func="train_step")
    out = run(tmp_path, "inplace", frames, message, fields)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "optimizer.step()"), "optimizer-step-between")


# -- the write's own operand saved the tensor: `x /= x.norm()` (norm saved x, then div_ wrote it) --
CLIP = """
    import torch.nn.functional as F

    def clip_loss(img_emb, txt_emb, scale):
        img_emb /= img_emb.norm(dim=-1, keepdim=True)
        txt_emb = txt_emb / txt_emb.norm(dim=-1, keepdim=True)
        logits = scale * img_emb @ txt_emb.t()
        return F.cross_entropy(logits, targets)
    """


def test_a_normalisation_in_place_in_a_helper_is_found_through_the_call(tmp_path):
    write(tmp_path, "losses.py", CLIP)
    write(tmp_path, "train.py", """
        from losses import clip_loss
        def main():
            img_emb, txt_emb = model(img, txt)
            loss = clip_loss(img_emb, txt_emb, model.logit_scale)
            loss.backward()
        """)
    message, fields = msg("Div")
    frames = backward_frames(tmp_path, func="main")
    out = run(tmp_path, "inplace", frames, message, fields)
    assert first(out) == ("losses.py", line_of(tmp_path, "losses.py", "img_emb /="), "inplace-augassign")
    assert not any(s.line == line_of(tmp_path, "losses.py", "txt_emb = txt_emb /") for s in out.fix_sites)


# -- no traced write: modules built with inplace=True become candidates (new user round 3) ------
LAYER_LIST = """
    import torch.nn as nn

    class Residual(nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return x + self.fn(x)

    def make_mlp(d):
        layers = [nn.Linear(d, d), nn.Tanh()]
        layers.append(Residual(nn.Sequential(nn.ReLU(inplace=True), nn.Linear(d, d))))
        return nn.Sequential(*layers)
    """


def test_an_inplace_module_in_a_list_of_layers_is_a_candidate_when_nothing_is_traced(tmp_path):
    write(tmp_path, "model.py", LAYER_LIST)
    write(tmp_path, "train.py", "from model import make_mlp\nmodel = make_mlp(4)\nloss = model(x).sum()\nloss.backward()\n")
    message, fields = msg("Tanh")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", "inplace=True"), "inplace-kwarg")
    assert all(s.searched for s in out.fix_sites)          # candidates: --apply writes one only with --pick


def test_no_candidate_when_a_write_was_traced(tmp_path):
    write(tmp_path, "model.py", LAYER_LIST.replace("return nn.Sequential(*layers)",
                                                   "return nn.Sequential(*layers)\n\ndef bump(h):\n    h += 1\n    return h"))
    write(tmp_path, "train.py", "import torch\nfrom model import make_mlp\nmodel = make_mlp(4)\n"
                                "h = torch.tanh(x)\nh += 1\nloss = h.sum()\nloss.backward()\n")
    message, fields = msg("Tanh")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out)[:2] == ("train.py", 5) and not out.fix_sites[0].searched
    assert not any(s.searched for s in out.fix_sites)


# -- an in-place write through a view of the saved output (new user round 5) --------------------
def test_a_view_of_the_named_output_is_that_output(tmp_path):
    # `.squeeze(-1)` shares the sigmoid output's memory and version counter: masked_fill_ on it
    # spoils what sigmoid saved, so it is the message's tensor, not "a weaker candidate"
    write(tmp_path, "train.py", """
        import torch
        def gate(h, proj, valid):
            p = torch.sigmoid(proj(h)).squeeze(-1)
            p.masked_fill_(~valid, 0.0)
            return p
        loss = gate(h, proj, valid).sum()
        loss.backward()
        """)
    message, fields = msg("Sigmoid")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "masked_fill_"), "inplace-method")
    reason = out.fix_sites[0].reason
    assert "weaker candidate" not in reason
    assert "the output of torch.sigmoid, seen through .squeeze()" in reason


# -- recurrent layers: autograd names them MkldnnRnnLayer / CudnnRnnBackward0 ------------------
RNN_MODEL = """
    import torch.nn as nn

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, n, d, dropout=0.5):
            super().__init__()
            self.drop = nn.Dropout(dropout, inplace=True)
            self.encoder = nn.Embedding(n, d)
            self.rnn = getattr(nn, rnn_type)(d, d, 2, dropout=dropout)
            self.decoder = nn.Linear(d, n)

        def forward(self, x, hidden):
            emb = self.encoder(x)
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            return self.decoder(output), hidden
    """
RNN_TRAIN = """
    import argparse
    from model import RNNModel
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=20)
    args = parser.parse_args()
    model = RNNModel("LSTM", 10, 8)
    lr = args.lr
    for epoch in range(3):
        output, hidden = model(x, hidden)
        loss = criterion(output, y)
        loss.backward()
        lr /= 4.0
    """


def test_rnn_node_names_are_one_family():
    assert op_family("MkldnnRnnLayer") == op_family("CudnnRnnBackward0") == op_family("LSTM") == "rnn"
    assert op_family("GRUCell") == op_family("rnn") == "rnn"


def test_inplace_dropout_on_an_rnn_output_is_first_and_a_namespace_number_is_no_candidate(tmp_path):
    write(tmp_path, "model.py", RNN_MODEL)
    write(tmp_path, "train.py", RNN_TRAIN)
    message, fields = msg("MkldnnRnnLayer")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", "inplace=True"), "inplace-kwarg")
    # `lr = args.lr` is a number from the command line: `lr /= 4.0` cannot be what autograd saved
    assert all(s.code.strip() != "lr /= 4.0" for s in out.fix_sites), [s.code for s in out.fix_sites]


# -- writes a forward hook makes, and writes through a view --------------------------------------
HOOKS = """
    import torch.nn as nn

    def attach_scaling(model, scale):
        def hook(module, inputs, output):
            output.mul_(scale)
        for m in model.modules():
            if isinstance(m, nn.ReLU):
                m.register_forward_hook(hook)
    """


def test_an_in_place_write_in_a_forward_hook_on_the_modules_that_saved_it_is_the_fix_site(tmp_path):
    write(tmp_path, "utils.py", HOOKS)
    write(tmp_path, "train.py", "from utils import attach_scaling\nattach_scaling(model, 2.0)\n"
                                "loss = model(x).sum()\nloss.backward()\n")
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("utils.py", line_of(tmp_path, "utils.py", "output.mul_"), "inplace-method")
    assert out.fix_sites[0].score >= 0.8      # the hooked modules are ReLUs: the message's family


def test_a_forward_hook_that_writes_a_fresh_tensor_is_no_candidate(tmp_path):
    write(tmp_path, "utils.py", HOOKS.replace("output.mul_(scale)", "extra = output * 2\n        extra.mul_(scale)"))
    write(tmp_path, "train.py", "from utils import attach_scaling\nattach_scaling(model, 2.0)\n"
                                "loss = model(x).sum()\nloss.backward()\n")
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert not any(s.path == "utils.py" and s.score >= 0.8 for s in out.fix_sites), out.fix_sites


VIEW_WRITE = """
    import torch.nn as nn

    class Wrapper(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            hidden = self.net(x)
            rep = hidden.flatten(1)
            rep.div_(rep.norm(dim=-1, keepdim=True))
            return rep
    """


def test_an_in_place_write_through_a_view_matches_an_asstrided_message(tmp_path):
    write(tmp_path, "model.py", VIEW_WRITE)
    write(tmp_path, "train.py", "from model import Wrapper\nmodel = Wrapper(net)\nloss = model(x).sum()\n"
                                "loss.backward()\n")
    message, fields = msg("AsStrided")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("model.py", line_of(tmp_path, "model.py", "rep.div_"), "inplace-method")


def test_the_same_write_on_the_base_name_is_not_a_view_match(tmp_path):
    write(tmp_path, "model.py", VIEW_WRITE.replace("rep = hidden.flatten(1)", "rep = hidden"))
    write(tmp_path, "train.py", "from model import Wrapper\nmodel = Wrapper(net)\nloss = model(x).sum()\n"
                                "loss.backward()\n")
    message, fields = msg("AsStrided")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert not any(s.path == "model.py" and s.score >= 0.8 for s in out.fix_sites), out.fix_sites


# -- a module whose forward returns a name: the family of the name's last value ----------------
STYLE_NET = """
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.conv(x)
            y = self.relu(y)
            return y
    """
HELPER = """
    def normalize_batch(batch):
        batch = batch.div_(255.0)
        return batch - 0.5
    """
STYLE_TRAIN = """
    import utils
    from net import Net
    model = Net()
    inputs = utils.normalize_batch(x)
    y = model(x)
    y = utils.normalize_batch(y)
    loss = y.sum()
    loss.backward()
    """


def test_a_helper_dividing_a_modules_relu_output_in_place_is_the_fix_site(tmp_path):
    """fast_neural_style: normalize_batch(transformer(x)) divides the output of the forward's last
    ReLU in place (the forward returns a name last bound to it)."""
    write(tmp_path, "net.py", STYLE_NET)
    write(tmp_path, "utils.py", HELPER)
    write(tmp_path, "train.py", STYLE_TRAIN)
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("utils.py", line_of(tmp_path, "utils.py", "div_"), "inplace-method")
    assert "Net" in out.fix_sites[0].reason


def test_a_forward_returning_a_conv_output_by_name_is_no_relu_match(tmp_path):
    """The same helper on a module whose last op is a convolution (its output is not saved): the
    write is not a match for a Relu message."""
    write(tmp_path, "net.py", STYLE_NET.replace("y = self.relu(y)\n", "y = self.conv(self.relu(y))\n"))
    write(tmp_path, "utils.py", HELPER)
    write(tmp_path, "train.py", STYLE_TRAIN)
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert all(s.score < 0.8 for s in out.fix_sites if s.path == "utils.py"), out.fix_sites


def test_a_module_built_inplace_that_no_traced_write_reaches_gets_no_safe_patch(tmp_path):
    """No write to the Relu output is traced: a module built with inplace=True elsewhere is listed
    as a guess, and its patch (drop inplace=True) is unsafe with that reason, never safe."""
    from tracefix.patcher import propose

    write(tmp_path, "features.py", """
        import torch.nn as nn

        def make_features(width):
            return nn.Sequential(nn.Conv2d(3, width, 3), nn.ReLU(inplace=True))
        """)
    write(tmp_path, "train.py", "from features import make_features\nfeats = make_features(8)\n"
                                "loss = step(x)\nloss.backward()\n")
    message, fields = msg("Relu")
    out = run(tmp_path, "inplace", backward_frames(tmp_path), message, fields)
    assert first(out) == ("features.py", line_of(tmp_path, "features.py", "inplace=True"), "inplace-kwarg")
    assert out.fix_sites[0].guess
    patches = propose(out, tmp_path)
    assert patches and all(p.applicability != "safe" for p in patches), patches
    assert "remains unless the Relu output comes through it" in patches[0].reason
