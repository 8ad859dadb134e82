"""An in-place write rewritten to rebind its name (``x = x.op(...)``, ``x = x.clone()``) is `safe` only
when the new value reaches every reader of the old one: the name is read afterwards (or returned, for
a parameter or a loop variable over a model's parameters) and no other tensor shares its memory."""
from __future__ import annotations

import pytest

from test_patcher import diag_for, site, write
from tracefix.patcher import propose


def first(tmp_path, text, line, kind):
    write(tmp_path, text)
    patches = propose(diag_for([site(line, kind)]), tmp_path)
    return patches[0] if patches else None


PRUNE = """import torch
class Pruner:
    @torch.no_grad()
    def enforce(self):
        for name, p in self.model.named_parameters():
            if name in self.masks:
                p[~self.masks[name]] = 0.0
"""


def test_clone_into_a_loop_parameter_nothing_reads_is_unsafe(tmp_path):
    p = first(tmp_path, PRUNE, 7, "inplace-subscript")
    assert p.applicability == "unsafe" and "'p' is not read after this write" in p.reason
    assert "p = p.clone()\n" in p.files[0][2]


def test_clone_into_a_model_parameter_read_earlier_in_the_loop_is_unsafe(tmp_path):
    text = PRUNE.replace("if name in self.masks:", "if p.dim() == 2:")
    p = first(tmp_path, text, 7, "inplace-subscript")
    assert p.applicability == "unsafe" and "'p'" in p.reason


@pytest.mark.parametrize("tail", ["", "    print(p.sum())\n"])
def test_clone_into_a_function_parameter_not_returned_is_unsafe(tmp_path, tail):
    p = first(tmp_path, "def prune(p, mask):\n    p[mask] = 0.0\n" + tail, 2, "inplace-subscript")
    assert p.applicability == "unsafe" and "'p'" in p.reason and "caller's tensor" in p.reason


@pytest.mark.parametrize("body, line", [
    ("def f(x):\n    h = x.exp()\n    h[0] = 1\n    return h\n", 3),
    ("def f(x):\n    h = x.exp()\n    for i in range(3):\n        y = h.sum()\n        h[i] = y\n", 5),
    ("def f(h, m):\n    h[m] = 0\n    return h.softmax(-1)\n", 2),
    # the next statement rebinds h from its own value: that value is read first
    ("def f(x, m):\n    h = x.softmax(-1)\n    h[m] = 0.0\n    h = h / h.sum(-1, keepdim=True)\n    return h\n", 3),
    ("def f(x, m):\n    h = x.softmax(-1)\n    h[m] = 0.0\n    h: object = h * 2\n    return h\n", 3),
])
def test_clone_of_a_name_read_later_stays_safe(tmp_path, body, line):
    p = first(tmp_path, body, line, "inplace-subscript")
    assert p.applicability == "safe", p.reason
    code = p.files[0][2]
    assert code.count(".clone()") == 1 and code.index("= h.clone()") < code.index("h[")


def test_clone_before_a_rebinding_from_another_value_is_unsafe(tmp_path):
    body = "def f(x, m):\n    h = x.softmax(-1)\n    h[m] = 0.0\n    h = x.sum()\n    return h\n"
    p = first(tmp_path, body, 3, "inplace-subscript")
    assert p.applicability == "unsafe" and "'h' is not read after this write" in p.reason


def test_method_statement_in_a_helper_returning_nothing_is_unsafe(tmp_path):
    p = first(tmp_path, 'def squash_(t):\n    """In place."""\n    t.sigmoid_()\n', 3, "inplace-method")
    assert p.applicability == "unsafe" and "'t' is not read after this write" in p.reason
    assert "t = t.sigmoid()" in p.files[0][2]
    p = first(tmp_path, "import torch\ndef squash_(t):\n    torch.sigmoid_(t)\n", 3, "inplace-method")
    assert p.applicability == "unsafe" and "'t'" in p.reason


def test_method_statement_read_later_stays_safe(tmp_path):
    p = first(tmp_path, "def f(x):\n    h = x.exp()\n    h.sigmoid_()\n    return h.sum()\n", 3, "inplace-method")
    assert p.applicability == "safe" and "    h = h.sigmoid()\n" in p.files[0][2]


def test_augassign_on_a_parameter_not_returned_is_unsafe(tmp_path):
    p = first(tmp_path, "def f(x, y):\n    x += y\n    print(x)\n", 2, "inplace-augassign")
    assert p.applicability == "unsafe" and "'x' is a parameter of f() and is not returned" in p.reason


@pytest.mark.parametrize("method", ["fill_diagonal_(0.0)", "uniform_()", "normal_(0, 1)", "fill_(v)",
                                    "exponential_()", "random_()"])
def test_methods_without_an_out_of_place_twin_get_no_rewrite(tmp_path, method):
    text = f"def f(x, v):\n    sim = x @ x.t()\n    sim.{method}\n    return sim.sum()\n"
    assert first(tmp_path, text, 3, "inplace-method") is None


def test_fill_with_a_number_becomes_full_like(tmp_path):
    p = first(tmp_path, "import torch\ndef f(x):\n    h = x.exp()\n    h.fill_(0.5)\n    return h\n", 4,
              "inplace-method")
    assert p.applicability == "safe" and "h = torch.full_like(h, 0.5)" in p.files[0][2]


VIEW = """import torch
def forward(self, tokens):
    hidden = torch.tanh(self.proj(tokens))
    cls = hidden[:, 0]
    cls /= self.temperature
    pooled = hidden.mean(dim=1)
    return self.cls_head(cls + pooled)
"""


def test_augassign_on_a_view_of_a_tensor_read_later_is_unsafe(tmp_path):
    p = first(tmp_path, VIEW, 5, "inplace-augassign")
    assert p.applicability == "unsafe"
    assert "'cls' is a view of 'hidden'" in p.reason and "(read at line 6)" in p.reason


def test_augassign_on_a_view_whose_base_is_not_read_again_stays_safe(tmp_path):
    p = first(tmp_path, VIEW.replace("hidden.mean(dim=1)", "tokens.mean(dim=1)"), 5, "inplace-augassign")
    assert p.applicability == "safe" and "cls = cls / self.temperature" in p.files[0][2]


@pytest.mark.parametrize("body, line, kind", [
    ("def f(h):\n    c = h.view(-1)\n    c.mul_(2)\n    return h.sum() + c.sum()\n", 3, "inplace-method"),
    ("def f(h):\n    c = h.detach()\n    c = c.sub_(1)\n    return h, c\n", 3, "inplace-method"),
    ("def f(h):\n    c = h.transpose(0, 1)\n    c[1] = 0\n    return h, c\n", 3, "inplace-subscript"),
    ("def f(self):\n    w = self.weight.data\n    w *= 2\n    return w\n", 3, "inplace-augassign"),
])
def test_writes_through_views_are_unsafe(tmp_path, body, line, kind):
    p = first(tmp_path, body, line, kind)
    assert p.applicability == "unsafe" and "is a view of" in p.reason, p.reason


RNN = """import torch
class TinyRNN(torch.nn.Module):
    def forward(self, x):
        b, t, _ = x.shape
        states = torch.zeros(b, t + 1, self.hidden)
        for i in range(t):
            states[:, i + 1] = torch.tanh(self.inp(x[:, i]) + self.rec(states[:, i]))
        return self.out(states[:, 1:])
"""


def test_clone_where_the_right_hand_side_reads_the_copy_is_unsafe(tmp_path):
    p = first(tmp_path, RNN, 7, "inplace-subscript")
    assert p.applicability == "unsafe" and "right-hand side reads 'states'" in p.reason
    assert "loop" in p.reason


# `y = x.op_(...)` / `return x.op_(...)` becomes `x.op(...)`: the result is used where it was, and
# only code that sees `x` itself afterwards could miss the in-place change
@pytest.mark.parametrize("body, line", [
    ("import torch\ndef f(mu, logvar):\n    std = torch.exp(0.5 * logvar)\n    eps = torch.randn_like(std)\n"
     "    return std.mul_(eps).add_(mu)\n", 5),
    ("import torch\ndef f(mu, logvar):\n    std = torch.exp(0.5 * logvar)\n    z = std.mul_(torch.randn_like(std))\n"
     "    return z + mu\n", 4),
])
def test_a_used_result_of_a_local_nothing_reads_again_is_safe(tmp_path, body, line):
    p = first(tmp_path, body, line, "inplace-method")
    assert p.applicability == "safe", p.reason
    assert "std.mul(" in p.files[0][2] and "mul_" not in p.files[0][2]


def test_a_used_result_whose_receiver_is_read_again_rebinds_both(tmp_path):
    """`z = std.mul_(e)` left z and std on one changed tensor: `z = std = std.mul(e)` keeps that."""
    body = ("import torch\ndef f(mu, logvar):\n    std = torch.exp(0.5 * logvar)\n"
            "    z = std.mul_(torch.randn_like(std))\n    return z + mu, std\n")
    p = first(tmp_path, body, 4, "inplace-method")
    assert p.applicability == "safe", p.reason
    assert "    z = std = std.mul(torch.randn_like(std))\n" in p.files[0][2]


@pytest.mark.parametrize("body, line, said", [
    # read again in the same statement
    ("import torch\ndef f(logvar):\n    std = torch.exp(logvar)\n    return std.mul_(2) + std\n", 4, "no longer modified"),
    # the caller's tensor
    ("import torch\ndef f(std, eps):\n    return std.mul_(eps)\n", 3, "caller's tensor"),
    # a view of a tensor read later
    ("import torch\ndef f(buf):\n    b = buf.exp()\n    s = b.view(-1)\n    y = s.mul_(2)\n    return y, b\n", 5, "view of 'b'"),
])
def test_a_used_result_whose_receiver_is_seen_elsewhere_is_unsafe(tmp_path, body, line, said):
    p = first(tmp_path, body, line, "inplace-method")
    assert p.applicability == "unsafe" and said in p.reason, p.reason
