"""Records, on a machine without CUDA, the crash a framework program gives on a CUDA GPU (the
programs whose expected.toml says ``recorded = true``), as ``crash.log`` in its folder.

The program's own ``train.py`` runs under the real framework, on the CPU, with one torch call
replaced by a stand-in (``stand_in`` in expected.toml) that raises the error the CUDA kernel raises
in that call, worded as torch 2.11 words it on a GPU.  Every frame of the log is a real one (the
user's, the framework's, torch's) except the stand-in's own, which is left out; the log starts at the
traceback, and the project folder reads as /home/user/projects/<name>.  Where a GPU is at hand, run ``python train.py`` there
instead: that log needs no stand-in.

    python tests/frameworks/record_cuda_crash.py tests/frameworks/<name>
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

STAND_INS = {
    # GradScaler.unscale_ on bf16 gradients: the CUDA kernel has no BFloat16 case (the CPU one has)
    "amp-unscale-bf16": '''
import torch
_real = torch._amp_foreach_non_finite_check_and_unscale_
def _stand_in(grads, found_inf, inv_scale):
    if any(g.dtype == torch.bfloat16 for g in grads):
        raise NotImplementedError(
            "\\"_amp_foreach_non_finite_check_and_unscale_cuda\\" not implemented for 'BFloat16'")
    return _real(grads, found_inf, inv_scale)
torch._amp_foreach_non_finite_check_and_unscale_ = _stand_in
''',
    # A tensor the project makes without device= stays on the CPU while the framework moved the
    # module and the batch to cuda:0; F.linear on it is where CUDA's addmm refuses it.
    "cpu-made-into-linear": '''
import os, sys
import torch
import torch.nn.functional as F
_project = os.getcwd() + os.sep
def _factory(real):
    def made(*args, **kwargs):
        out = real(*args, **kwargs)
        if "device" not in kwargs and sys._getframe(1).f_code.co_filename.startswith(_project):
            out._on_cpu = True
        return out
    return made
for _name in ("zeros", "ones", "randn", "rand", "empty", "full"):
    setattr(torch, _name, _factory(getattr(torch, _name)))
_real_linear = F.linear
def _stand_in(input, weight, bias=None):
    if getattr(input, "_on_cpu", False):
        raise RuntimeError("Expected all tensors to be on the same device, but got mat1 is on cpu, different "
                           "from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)")
    return _real_linear(input, weight, bias)
F.linear = _stand_in
''',
}


def record(folder: Path) -> str:
    exp = tomllib.loads((folder / "expected.toml").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / folder.name
        shutil.copytree(folder, project, ignore=shutil.ignore_patterns("expected.toml", "crash.log", "__pycache__"))
        hook = Path(tmp) / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(STAND_INS[exp["stand_in"]])
        env = dict(os.environ, PYTHONPATH=str(hook), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1",
                   CUDA_VISIBLE_DEVICES="")
        proc = subprocess.run([sys.executable, "train.py"], cwd=project, capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode != 0, "the stand-in did not make the program crash"
        # from the traceback on: what the CPU run printed before it (the framework's "GPU available:
        # False" banner) is not what the GPU run prints
        log = proc.stderr[proc.stderr.index("Traceback (most recent call last):"):]
        # the stand-in's own frame (its File line and the source and caret lines under it)
        log = re.sub(r'  File "[^"]*sitecustomize\.py", line \d+, in .*\n(?:    .*\n)*', "", log)
        return log.replace(str(project), f"/home/user/projects/{folder.name}").replace(tmp, "/tmp")


if __name__ == "__main__":
    target = Path(sys.argv[1]).resolve()
    (target / "crash.log").write_text(record(target))
    print(f"wrote {target / 'crash.log'}")
