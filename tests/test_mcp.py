"""tracefix mcp answers the MCP SDK's own client over stdio: its tools list, a diagnosis like the
json format's, apply with --apply's rules (a file that no longer matches the log is refused), undo."""
from __future__ import annotations

import json
import os
import shutil
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from conftest import REPO, SAMPLES

SAMPLE = SAMPLES / "target-dtype-getitem-bce"


def _text(result):
    assert not result.is_error, result
    return json.loads(result.content[0].text)


async def _session(cwd, calls):
    params = StdioServerParameters(command=sys.executable, args=["-m", "tracefix", "mcp"], cwd=str(cwd),
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await calls(session)


def test_the_tools_diagnose_apply_and_undo(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".tracefix"))
    log = (root / "crash.log").read_text()
    before = (root / "dataset.py").read_bytes()

    async def calls(session):
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        diag = _text(await session.call_tool("diagnose", {"log": log, "root": str(root)}))
        applied = _text(await session.call_tool("apply", {"log": str(root / "crash.log"), "root": str(root)}))
        patched = (root / "dataset.py").read_bytes()
        undone = _text(await session.call_tool("undo", {"root": str(root)}))
        return tools, diag, applied, patched, undone

    tools, diag, applied, patched, undone = anyio.run(_session, tmp_path, calls)
    assert tools == ["apply", "diagnose", "explain", "run_verify", "undo"]
    (d,) = diag["diagnoses"]
    assert d["id"] == "target-dtype" and d["fix_sites"][0]["path"] == "dataset.py" and diag["exit_code"] == 0
    assert applied["exit_code"] == 0 and applied["applied"] == "dataset.py"
    assert b"torch.tensor(self.labels[i], dtype=torch.float32)" in patched
    assert undone["exit_code"] == 0 and (root / "dataset.py").read_bytes() == before


def test_apply_refuses_a_file_that_no_longer_matches_the_log(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".tracefix"))
    # the log's crash line (train.py:28) reads something else now
    changed = (root / "train.py").read_text().replace("    logits = model(tokens)\n", "")
    (root / "train.py").write_text(changed)
    dataset = (root / "dataset.py").read_text()

    async def calls(session):
        return _text(await session.call_tool("apply", {"log": (root / "crash.log").read_text(), "root": str(root)}))

    applied = anyio.run(_session, tmp_path, calls)
    assert applied.get("applied", "nothing").startswith("nothing")
    assert (root / "train.py").read_text() == changed and (root / "dataset.py").read_text() == dataset


def test_explain_names_the_fix(tmp_path):
    async def calls(session):
        return _text(await session.call_tool("explain", {"entry_id": "leaf-inplace"}))

    res = anyio.run(_session, tmp_path, calls)
    assert res["exit_code"] == 0 and "no_grad" in res["text"]
