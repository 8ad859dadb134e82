"""Locator, fp16/bf16 families: dtypes traced through config objects and half tensors traced into
``nn.Parameter``, on small trees in tmp_path.  Negative cases: code that looks alike must not win."""
from __future__ import annotations

import textwrap

from test_locator import BF16, FP16, SCALER_FRAMES, first, line_of, run, user_frame, write

LOOP = """
    def fit(model, steps=5):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(torch.randn(4, 8)).mean()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
"""


def code(*parts: str) -> str:
    """Parts written at different indents, each dedented, as one file."""
    return "\n".join(textwrap.dedent(p).strip("\n") for p in parts) + "\n"


def _fp16(root, rel="train.py", needle="scaler.step(opt)", func="fit"):
    return run(root, "fp16-params", [user_frame(root, rel, needle, func=func), *SCALER_FRAMES], FP16,
               exc="ValueError")


def _sites(out):
    return [(s.path, s.line, s.kind) for s in out.fix_sites]


# -- dataclass field defaults ------------------------------------------------------------------------
def test_dataclass_field_read_only_by_the_cast_is_the_fix_site(tmp_path):
    write(tmp_path, "config.py", """
        from dataclasses import dataclass, field

        @dataclass
        class Cfg:
            amp_dtype: str = "float16"
            param_dtype: str = field(default="float16")
            device: str = "cpu"
        """)
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        from config import Cfg
        """, LOOP, """
        def main(cfg: Cfg):
            model = nn.Linear(8, 1).to(cfg.device, getattr(torch, cfg.param_dtype))
            with torch.autocast("cpu", dtype=getattr(torch, cfg.amp_dtype)):
                pass
            fit(model)

        main(Cfg())
        """))
    out = _fp16(tmp_path)
    cast = line_of(tmp_path, "train.py", "getattr(torch, cfg.param_dtype)")
    assert _sites(out)[:2] == [("config.py", line_of(tmp_path, "config.py", "param_dtype"), "config-dtype"),
                               ("train.py", cast, "model-cast")]
    assert out.fix_sites[0].score > out.fix_sites[1].score
    # amp_dtype only feeds autocast: it is not a site
    assert not any(s.path == "config.py" and "amp_dtype" in s.code for s in out.fix_sites)


def test_dataclass_field_read_elsewhere_too_keeps_the_cast_first(tmp_path):
    write(tmp_path, "config.py", """
        from dataclasses import dataclass

        @dataclass
        class Cfg:
            dtype: str = "float16"
        """)
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        from config import Cfg
        """, LOOP, """
        def main(cfg: Cfg):
            model = nn.Linear(8, 1).to(getattr(torch, cfg.dtype))
            with torch.autocast("cpu", dtype=getattr(torch, cfg.dtype)):
                pass
            fit(model)

        main(Cfg())
        """))
    out = _fp16(tmp_path)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "nn.Linear(8, 1).to"), "model-cast")
    assert not any(s.kind == "config-dtype" for s in out.fix_sites)


def test_constructor_keyword_overrides_the_default(tmp_path):
    write(tmp_path, "config.py", """
        from dataclasses import dataclass

        @dataclass
        class Cfg:
            param_dtype: str = "float32"
        """)
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        from config import Cfg
        """, LOOP, """
        def main(cfg):
            fit(nn.Linear(8, 1).to(getattr(torch, cfg.param_dtype)))

        main(Cfg(param_dtype="float16"))
        """))
    out = _fp16(tmp_path)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", 'Cfg(param_dtype="float16")'), "config-dtype")


# -- dict keys --------------------------------------------------------------------------------------
CONFIG_DICT = """
    CONFIG = {
        "model": {"width": 8},
        "precision": "float16",
        "device": "cpu",
    }
    """


def test_dict_key_through_parameter_default_and_caller(tmp_path):
    write(tmp_path, "config.py", CONFIG_DICT)
    write(tmp_path, "engine.py", code("""
        import torch
        import torch.nn as nn

        def build(cfg):
            net = nn.Linear(cfg["model"]["width"], 1)
            return net.to(device=cfg["device"], dtype=getattr(torch, cfg["precision"]))
        """, LOOP))
    write(tmp_path, "train.py", """
        from config import CONFIG
        from engine import build, fit

        def main(cfg=CONFIG):
            fit(build(cfg))

        main()
        """)
    out = run(tmp_path, "fp16-params",
              [user_frame(tmp_path, "train.py", "fit(build(cfg))"),
               user_frame(tmp_path, "engine.py", "scaler.step(opt)", func="fit"), *SCALER_FRAMES],
              FP16, exc="ValueError")
    assert _sites(out)[:2] == [("config.py", line_of(tmp_path, "config.py", '"precision"'), "config-dtype"),
                               ("engine.py", line_of(tmp_path, "engine.py", "net.to("), "model-cast")]


def test_dict_key_also_read_for_autocast_keeps_the_cast_first(tmp_path):
    write(tmp_path, "config.py", CONFIG_DICT)
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        from config import CONFIG
        """, LOOP, """
        model = nn.Linear(8, 1).to(dtype=getattr(torch, CONFIG["precision"]))
        with torch.autocast("cpu", dtype=getattr(torch, CONFIG.get("precision"))):
            pass
        fit(model)
        """))
    out = _fp16(tmp_path)
    assert first(out) == ("train.py", line_of(tmp_path, "train.py", "nn.Linear(8, 1).to"), "model-cast")
    assert not any(s.kind == "config-dtype" for s in out.fix_sites)


def test_data_cast_through_config_is_not_a_site(tmp_path):
    write(tmp_path, "config.py", CONFIG_DICT)
    write(tmp_path, "train.py", code("""
        import torch
        from config import CONFIG
        """, LOOP, """
        batch = torch.randn(4, 8).to(dtype=getattr(torch, CONFIG["precision"]))
        fit(make_net())
        """))
    out = _fp16(tmp_path)
    assert out.fix_sites == (), out.fix_sites


# -- argparse and lookup tables ---------------------------------------------------------------------
def test_argparse_default_through_a_lookup_table_fixes_the_cast(tmp_path):
    write(tmp_path, "train.py", code("""
        import argparse
        import torch
        import torch.nn as nn

        DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
        """, LOOP, """
        def get_args():
            p = argparse.ArgumentParser()
            p.add_argument("--param-dtype", choices=sorted(DTYPES), default="fp16")
            return p.parse_args()

        def make_layers():
            return nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))

        def main():
            args = get_args()
            fit(make_layers().to("cpu", DTYPES[args.param_dtype]))

        main()
        """))
    out = _fp16(tmp_path)
    # the table's entry is not the choice, and the argparse default may be overridden on the
    # command line the log does not show: the cast is where to fix it
    assert _sites(out) == [("train.py", line_of(tmp_path, "train.py", "make_layers().to("), "model-cast")]
    site = out.fix_sites[0]
    raw = (tmp_path / "train.py").read_text().splitlines()[site.line - 1]
    assert site.col == raw.index("DTYPES[")
    assert "argparse" in site.reason or "lookup" in site.reason


def test_argparse_default_read_by_getattr(tmp_path):
    write(tmp_path, "train.py", code("""
        import argparse
        import torch
        import torch.nn as nn
        """, LOOP, """
        parser = argparse.ArgumentParser()
        parser.add_argument("--dtype", default="float16")
        args = parser.parse_args()
        fit(nn.Linear(8, 1).to(getattr(torch, args.dtype)))
        """))
    out = _fp16(tmp_path)
    assert _sites(out) == [("train.py", line_of(tmp_path, "train.py", "nn.Linear(8, 1).to("), "model-cast")]


def test_float32_config_gives_no_site(tmp_path):
    write(tmp_path, "config.py", CONFIG_DICT.replace('"float16"', '"float32"'))
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        from config import CONFIG
        """, LOOP, """
        fit(nn.Linear(8, 1).to(dtype=getattr(torch, CONFIG["precision"])))
        """))
    out = _fp16(tmp_path)
    assert out.fix_sites == (), out.fix_sites


# -- module constants ---------------------------------------------------------------------------------
def test_module_constant_used_only_by_the_cast_bf16(tmp_path):
    write(tmp_path, "settings.py", "import torch\nPARAM_DTYPE = torch.bfloat16\n")
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        from settings import PARAM_DTYPE
        """, LOOP, """
        fit(nn.Linear(8, 1).to(PARAM_DTYPE))
        """))
    out = run(tmp_path, "bf16-params", [user_frame(tmp_path, "train.py", "scaler.step(opt)", func="fit"),
                                        *SCALER_FRAMES], BF16)
    got = _sites(out)
    # the scaler comes first for bf16; among the dtype sites the constant outranks the cast
    assert got[0] == ("train.py", line_of(tmp_path, "train.py", "GradScaler"), "grad-scaler")
    assert got[1:] == [("settings.py", 2, "config-dtype"),
                       ("train.py", line_of(tmp_path, "train.py", "to(PARAM_DTYPE)"), "model-cast")]


# -- parameters created in half ----------------------------------------------------------------------
def test_register_parameter_through_a_name(tmp_path):
    write(tmp_path, "blocks.py", """
        import torch
        import torch.nn as nn

        class LayerScale(nn.Module):
            def __init__(self, dim):
                super().__init__()
                gamma = torch.full((dim,), 1e-2, dtype=torch.float16)
                self.register_parameter("gamma", nn.Parameter(gamma))
                mask = torch.ones(dim, dtype=torch.float16)
                self.register_buffer("mask", mask)
                frozen = torch.zeros(dim, dtype=torch.float16)
                self.frozen = nn.Parameter(frozen, requires_grad=False)
                self.upcast = nn.Parameter(torch.zeros(dim, dtype=torch.float16).float())
        """)
    write(tmp_path, "train.py", code("import torch\nfrom blocks import LayerScale", LOOP, "fit(LayerScale(8))"))
    out = _fp16(tmp_path)
    assert _sites(out) == [("blocks.py", line_of(tmp_path, "blocks.py", "gamma = torch.full"), "param-dtype")]


def test_parameter_from_arithmetic_and_initialiser_chain(tmp_path):
    write(tmp_path, "prompt.py", """
        import torch
        import torch.nn as nn

        class SoftPrompt(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.embedding = nn.Parameter(torch.randn(n, d, dtype=torch.float16) * 0.02)
                self.bias = nn.Parameter(torch.empty(d, dtype=torch.float16).uniform_(-0.1, 0.1))
                self.table = torch.randn(n, d, dtype=torch.float16) * 0.02
        """)
    write(tmp_path, "train.py", code("import torch\nfrom prompt import SoftPrompt", LOOP, "fit(SoftPrompt(4, 8))"))
    out = _fp16(tmp_path)
    assert sorted(_sites(out)) == [("prompt.py", line_of(tmp_path, "prompt.py", "self.embedding"), "param-dtype"),
                                   ("prompt.py", line_of(tmp_path, "prompt.py", "self.bias"), "param-dtype")]


# -- config files -------------------------------------------------------------------------------------
def _json_project(tmp_path, precision):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.json").write_text(
        '{\n  "lr": 0.001,\n  "precision": "%s",\n  "amp": true\n}\n' % precision)
    write(tmp_path, "train.py", code("""
        import json
        import torch
        import torch.nn as nn
        """, LOOP, """
        with open("configs/base.json") as f:
            cfg = json.load(f)
        fit(nn.Linear(8, 1).to(dtype=getattr(torch, cfg["precision"])))
        """))


def test_json_config_value_fixes_the_cast_and_names_the_file(tmp_path):
    _json_project(tmp_path, "float16")
    out = _fp16(tmp_path)
    assert _sites(out) == [("train.py", line_of(tmp_path, "train.py", "nn.Linear(8, 1).to("), "model-cast")]
    assert "configs/base.json:3" in out.fix_sites[0].reason


def test_json_config_float32_gives_no_site(tmp_path):
    _json_project(tmp_path, "float32")
    out = _fp16(tmp_path)
    assert out.fix_sites == (), out.fix_sites


# -- parameters cast in a loop, layers built in half, self.half() ---------------------------------
def test_parameters_cast_in_a_loop(tmp_path):
    write(tmp_path, "train.py", code("""
        import torch
        import torch.nn as nn
        """, LOOP, """
        net = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 1))
        for p in net.parameters():
            p.data = p.data.half()
        data = torch.randn(4, 8)
        for x in [data]:
            x = x.half()
        fit(net)
        """))
    out = _fp16(tmp_path)
    assert _sites(out) == [("train.py", line_of(tmp_path, "train.py", "p.data = p.data.half()"), "model-cast")]


def test_layer_built_with_half_factory_kwarg(tmp_path):
    write(tmp_path, "model.py", """
        import torch
        import torch.nn as nn
        from dataclasses import dataclass

        @dataclass
        class Settings:
            dtype: str = "float32"

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 1, dtype=torch.float16)
                self.settings = Settings(dtype="float16")
        """)
    write(tmp_path, "train.py", code("import torch\nfrom model import Head", LOOP, "fit(Head())"))
    out = _fp16(tmp_path)
    assert _sites(out) == [("model.py", line_of(tmp_path, "model.py", "nn.Linear(8, 1, dtype"), "param-dtype")]


def test_self_half_in_a_module(tmp_path):
    write(tmp_path, "model.py", """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 1)
                self.half()

        class Batch:
            def __init__(self, x):
                self.x = x

            def prepare(self):
                return self.half()
        """)
    write(tmp_path, "train.py", code("import torch\nfrom model import Net", LOOP, "fit(Net())"))
    out = _fp16(tmp_path)
    assert _sites(out) == [("model.py", line_of(tmp_path, "model.py", "self.half()"), "model-cast")]


def test_argparse_default_converted_by_type(tmp_path):
    write(tmp_path, "train.py", code("""
        import argparse
        import torch
        import torch.nn as nn
        """, LOOP, """
        parser = argparse.ArgumentParser()
        parser.add_argument("--param-dtype", type=lambda s: getattr(torch, s), default="float16")
        parser.add_argument("--name", type=str, default="half")
        args = parser.parse_args()
        fit(nn.Linear(8, 1).to(args.param_dtype))
        print(args.name)
        """))
    out = _fp16(tmp_path)
    assert _sites(out) == [("train.py", line_of(tmp_path, "train.py", "nn.Linear(8, 1).to("), "model-cast")]


def test_namespace_over_a_config_dict(tmp_path):
    write(tmp_path, "config.py", CONFIG_DICT)
    write(tmp_path, "train.py", code("""
        from types import SimpleNamespace
        import torch
        import torch.nn as nn
        from config import CONFIG
        """, LOOP, """
        cfg = SimpleNamespace(**CONFIG)
        fit(nn.Linear(8, 1).to(cfg.device, getattr(torch, cfg.precision)))
        """))
    out = _fp16(tmp_path)
    assert _sites(out)[:2] == [("config.py", line_of(tmp_path, "config.py", '"precision"'), "config-dtype"),
                               ("train.py", line_of(tmp_path, "train.py", "nn.Linear(8, 1).to("), "model-cast")]


# -- a dtype looked up by a config built with an alternative constructor -------------------------------
def test_lookup_keyed_by_a_config_from_args_finds_the_cast(tmp_path):
    """DTYPES[cfg.precision] with cfg = TrainConfig.from_args(args): the dataclass default picks
    the key, the table entry is float16, and the cast that applies it is the fix site."""
    write(tmp_path, "config.py", """
        from dataclasses import dataclass, fields
        import torch

        DTYPES = {"fp32": torch.float32, "fp16": torch.float16}

        @dataclass
        class TrainConfig:
            precision: str = "fp16"

            @classmethod
            def from_args(cls, args):
                return cls(**{f.name: getattr(args, f.name) for f in fields(cls)})
        """)
    write(tmp_path, "factory.py", """
        import torch.nn as nn
        from config import DTYPES

        def build_model(cfg):
            model = nn.Linear(8, 1)
            return model.to(dtype=DTYPES[cfg.precision])
        """)
    write(tmp_path, "train.py", code("""
        import torch
        from config import TrainConfig
        from factory import build_model
        """, LOOP, """
        def main(args):
            cfg = TrainConfig.from_args(args)
            fit(build_model(cfg))
        """))
    out = _fp16(tmp_path)
    assert _sites(out)[0] == ("factory.py", line_of(tmp_path, "factory.py", "model.to("), "model-cast")
    # the key leads to float32: no cast is blamed
    (tmp_path / "config.py").write_text((tmp_path / "config.py").read_text().replace('= "fp16"', '= "fp32"'))
    out = _fp16(tmp_path)
    assert not any(s.kind == "model-cast" for s in out.fix_sites)


# -- a loader that casts only when its caller asks ------------------------------------------------------
def _loader(tmp_path, guard):
    write(tmp_path, "modeling.py", f"""
        import torch.nn as nn

        class LM(nn.Linear):
            @classmethod
            def from_pretrained(cls, path, torch_dtype=None):
                model = cls(8, 1)
                {guard}
                    model = model.to(dtype=torch_dtype)
                return model
        """)
    write(tmp_path, "train.py", code("""
        import torch
        from modeling import LM
        """, LOOP, """
        def main():
            model = LM.from_pretrained("ckpt", torch_dtype=torch.float16)
            fit(model)
        """))
    return _fp16(tmp_path)


def test_a_loader_casting_on_request_puts_the_caller_first(tmp_path):
    out = _loader(tmp_path, "if torch_dtype is not None:")
    caller = ("train.py", line_of(tmp_path, "train.py", "LM.from_pretrained"), "torch-dtype-fp16")
    cast = ("modeling.py", line_of(tmp_path, "modeling.py", "model.to("), "model-cast")
    assert _sites(out)[:2] == [caller, cast]
    assert "defaults to None" in out.fix_sites[1].reason


def test_an_unguarded_cast_of_a_dtype_option_stays_first(tmp_path):
    # (`if True:` keeps the indent; the cast happens whatever the caller passes)
    out = _loader(tmp_path, "if True:")
    assert _sites(out)[0] == ("modeling.py", line_of(tmp_path, "modeling.py", "model.to("), "model-cast")
