"""cuda-on-cpu on small projects in tmp_path: the device is chosen by availability where it is
written; torch.load gets map_location; a CPU-only build on a GPU machine gets install advice and
no patch; weights_only=False is never offered."""
from __future__ import annotations

import io
import textwrap

import pytest

from tracefix.families.cuda_on_cpu import locate as cuda_locate
from tracefix.knowledge import load_entries
from tracefix.pipeline import diagnose

ENTRIES = load_entries()
NOT_COMPILED = "AssertionError: Torch not compiled with CUDA enabled\n"
DESERIALIZE = ("RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
               "False. If you are running on a CPU-only machine, please use torch.load with "
               "map_location=torch.device('cpu') to map your storages to the CPU.\n")


@pytest.fixture(autouse=True)
def no_gpu_here(monkeypatch):
    monkeypatch.setattr(cuda_locate, "has_nvidia_gpu", lambda: False)


def write(root, rel, text):
    (root / rel).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def line(root, rel, needle):
    return next(i for i, t in enumerate((root / rel).read_text().splitlines(), 1) if needle in t)


def log(root, frames, message=NOT_COMPILED):
    out = ["Traceback (most recent call last):"]
    for rel, needle, func in frames:
        n = line(root, rel, needle)
        out += [f'  File "/home/u/proj/{rel}", line {n}, in {func}', f"    {(root / rel).read_text().splitlines()[n - 1].strip()}"]
    return "\n".join(out) + "\n" + message


def run(root, text):
    (d,) = diagnose(io.BytesIO(text.encode()), ENTRIES, root, patches=True).diagnoses
    assert d.entry_id == "cuda-on-cpu"
    assert not any("weights_only=False" in new for p in d.patches for _path, _old, new in p.files)
    return d


TRAIN = """
    import torch

    device = torch.device("cuda")
    x = torch.zeros(2).to(device)
"""


def test_the_device_variable_is_chosen_by_availability(tmp_path):
    write(tmp_path, "train.py", TRAIN)
    d = run(tmp_path, log(tmp_path, [("train.py", "x = torch.zeros", "<module>")]))
    assert [(s.line, s.kind) for s in d.fix_sites] == [(3, "device-choice")]
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in d.patches[0].files[0][2]


def test_a_cpu_only_build_on_a_gpu_machine_is_told_to_install_a_cuda_build(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_locate, "has_nvidia_gpu", lambda: True)
    write(tmp_path, "train.py", TRAIN)
    d = run(tmp_path, log(tmp_path, [("train.py", "x = torch.zeros", "<module>")]))
    assert d.fix_sites == () and d.patches == ()
    assert any("install a CUDA build of torch" in n for n in d.notes)


def test_a_gpu_checkpoint_is_loaded_with_map_location(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        state = torch.load("ckpt.pt")
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "torch.load", "<module>")], DESERIALIZE))
    assert [(s.line, s.kind) for s in d.fix_sites] == [(3, "load-map-location")]
    assert 'torch.load("ckpt.pt", map_location="cpu")' in d.patches[0].files[0][2]


def test_a_bare_cuda_call_is_named_not_patched(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        x = torch.zeros(2).cuda()
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "x = torch.zeros", "<module>")]))
    assert [(s.line, s.kind) for s in d.fix_sites] == [(3, "cuda-call")]
    assert d.patches == ()


def test_a_cpu_device_is_not_blamed(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        device = "cpu"
        x = torch.zeros(2).to(device)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "x = torch.zeros", "<module>")]))
    assert d.fix_sites == ()


def test_a_device_already_chosen_by_availability_is_not_patched_again(tmp_path):
    write(tmp_path, "train.py", """
        import torch

        use_gpu = True
        device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if use_gpu else "cpu")
        x = torch.zeros(2).to(device)
    """)
    d = run(tmp_path, log(tmp_path, [("train.py", "x = torch.zeros", "<module>")]))
    assert d.patches == ()
