"""Op families: 'ReluBackward0', 'torch.relu_', 'nn.ReLU' and 'F.relu' all name the family 'relu'.

Shared vocabulary for matching an autograd node named in a message with the code that produced it.
"""
from __future__ import annotations

import ast
import re

_FAMILY_EXACT = {
    "relu": "relu", "threshold": "relu", "relu6": "hardtanh", "hardtanh": "hardtanh",
    "leakyrelu": "leakyrelu", "rrelu": "leakyrelu", "prelu": "prelu",
    "sigmoid": "sigmoid", "logsigmoid": "logsigmoid", "tanh": "tanh", "exp": "exp", "expm1": "exp",
    "softmax": "softmax", "logsoftmax": "logsoftmax", "gelu": "gelu", "silu": "silu", "swish": "silu",
    "elu": "elu", "selu": "elu", "celu": "elu", "softplus": "softplus", "mish": "mish",
    "hardsigmoid": "hardsigmoid", "hardswish": "hardswish",
    "add": "add", "sub": "sub", "rsub": "sub", "mul": "mul", "div": "div", "pow": "pow",
    "neg": "neg", "addcmul": "addcmul", "addcdiv": "addcdiv", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "mm": "mm", "addmm": "mm", "bmm": "mm", "baddbmm": "mm", "matmul": "mm", "linear": "mm",
    "einsum": "mm", "mv": "mm", "dot": "mm", "addmv": "mm", "bilinear": "mm",
    "asstrided": "view", "slice": "view", "select": "view", "view": "view", "expand": "view",
    "unsqueeze": "view", "squeeze": "view", "transpose": "view", "t": "view", "permute": "view",
    "reshape": "view", "unsafeview": "view", "unsafesplit": "view", "split": "view",
    "splitwithsizes": "view", "chunk": "view", "narrow": "view", "unbind": "view",
    "diagonal": "view", "flatten": "view", "alias": "view", "index": "view", "viewas": "view",
    "clone": "clone", "cat": "cat", "stack": "stack", "embedding": "embedding",
    "embeddingbag": "embedding", "dropout": "dropout", "nativedropout": "dropout",
    "fuseddropout": "dropout", "featuredropout": "dropout", "alphadropout": "dropout",
    "maskedfill": "maskedfill", "where": "where", "gather": "gather", "scatter": "scatter",
    "clamp": "clamp", "clip": "clamp", "abs": "abs", "log": "log", "sin": "sin", "cos": "cos",
    "sum": "sum", "mean": "mean", "norm": "norm", "max": "max", "min": "min", "erf": "erf",
    "cumsum": "cumsum", "sort": "sort", "topk": "topk", "tanhshrink": "tanh",
}


def op_family(name: str) -> str:
    """'ReluBackward0' / 'Relu' / 'F.relu' / 'nn.ReLU' -> 'relu'; '' when empty."""
    n = (name or "").split("::")[-1].split(".")[-1]
    n = re.sub(r"Backward\d*$", "", n)
    n = n.strip("_").lower().replace("_", "")
    if not n:
        return ""
    if n in _FAMILY_EXACT:
        return _FAMILY_EXACT[n]
    if "batchnorm" in n:
        return "batchnorm"
    if "layernorm" in n:
        return "layernorm"
    if "groupnorm" in n:
        return "groupnorm"
    if "instancenorm" in n:
        return "instancenorm"
    if "conv" in n:
        return "conv"
    if "linear" in n:
        return "mm"
    if "dropout" in n:
        return "dropout"
    if "rnn" in n or "lstm" in n or "gru" in n:
        return "rnn"        # MkldnnRnnLayer, CudnnRnnBackward0, nn.LSTM, nn.GRUCell, self.rnn
    if "softmax" in n:
        return "logsoftmax" if "log" in n else "softmax"
    if n.endswith("pool") or "pool" in n:
        return "pool"
    m = re.match(r"(.*?)\d+d$", n)
    if m and m.group(1) in _FAMILY_EXACT:
        return _FAMILY_EXACT[m.group(1)]
    # 'Elu1' / 'LeakyReluBackward1': the backward of the in-place variant carries a trailing number
    m = re.match(r"([a-z]+?)\d+$", n)
    if m and m.group(1) in _FAMILY_EXACT:
        return _FAMILY_EXACT[m.group(1)]
    return n


KNOWN_FAMILIES = frozenset(_FAMILY_EXACT.values()) | {
    "batchnorm", "layernorm", "groupnorm", "instancenorm", "conv", "pool", "dropout", "rnn"}

BINOP_FAMILY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
                 ast.MatMult: "mm", ast.FloorDiv: "div"}


