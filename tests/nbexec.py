"""Run one test notebook on a real ipykernel with ``%load_ext tracefix`` (used by test_notebooks.py).

    python tests/nbexec.py NOTEBOOK FIX_CELL CRASH_CELL OUT.json
    python tests/nbexec.py --anomaly NOTEBOOK CRASH_CELL OUT.json

FIX_CELL and CRASH_CELL are 1-based positions in the notebook file.  The run: the extension is
loaded in a new first cell (twice: loading again must be harmless), every cell is executed up to the
crash; then ``%tracefix`` and ``%tracefix fix``; the cell ``%tracefix fix`` proposed is executed
with the cells after the fix cell up to the crashing one; then an unknown error, ``%unload_ext``
and the known error again.  Every output is written to OUT.json.
"""
from __future__ import annotations

import json
import sys

import nbformat
from nbclient import NotebookClient


def main(path: str, fix_cell: int, crash_cell: int, out_path: str) -> None:
    nb = nbformat.read(path, as_version=4)
    load = nbformat.v4.new_code_cell("%load_ext tracefix\nimport tracefix\ntracefix.load_ipython_extension(get_ipython())")
    nb.cells.insert(0, load)
    payloads: list = []

    def hook(cell, cell_index, execute_reply):
        payloads.extend(execute_reply["content"].get("payload", []))

    client = NotebookClient(nb, allow_errors=True, timeout=300, kernel_name="python3", on_cell_executed=hook)
    result: dict = {"cells": []}

    def run(source: str) -> list:
        cell = nbformat.v4.new_code_cell(source)
        nb.cells.append(cell)
        client.execute_cell(cell, len(nb.cells) - 1)
        return cell.outputs

    with client.setup_kernel():
        for i in range(0, crash_cell + 1):      # the load cell, then the file's cells 1..crash
            client.execute_cell(nb.cells[i], i)
            result["cells"].append(nb.cells[i].get("outputs", []))
        result["reshow"] = run("%tracefix")
        payloads.clear()
        result["fix_magic"] = run("%tracefix fix")
        texts = [p["text"] for p in payloads if p.get("source") == "set_next_input"]
        result["payload"] = texts[0] if texts else None
        if texts:
            result["fixed_cell"] = run(texts[0])
            result["rerun"] = [run(nb.cells[i].source) for i in range(fix_cell + 1, crash_cell + 1)
                               if nb.cells[i].cell_type == "code"]
        result["unknown"] = run("{}['missing']")
        result["unload"] = run("%unload_ext tracefix")
        result["after_unload"] = run("import torch\ntorch.ones(3, requires_grad=True).mul(2).backward()")
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)


def anomaly(path: str, crash_cell: int, out_path: str) -> None:
    """Run up to the crash, then ``%tracefix anomaly on`` and the cells again from the second one."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("%load_ext tracefix"))
    client = NotebookClient(nb, allow_errors=True, timeout=300, kernel_name="python3")
    result: dict = {}
    with client.setup_kernel():
        for i in range(0, crash_cell + 1):
            client.execute_cell(nb.cells[i], i)
        result["first"] = nb.cells[crash_cell].outputs
        result["magic"] = _append_run(client, nb, "%tracefix anomaly on")
        for i in range(2, crash_cell + 1):
            if nb.cells[i].cell_type == "code":
                outputs = _append_run(client, nb, nb.cells[i].source)
        result["second"] = outputs
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(result, fh)


def _append_run(client, nb, source: str) -> list:
    cell = nbformat.v4.new_code_cell(source)
    nb.cells.append(cell)
    client.execute_cell(cell, len(nb.cells) - 1)
    return cell.outputs


if __name__ == "__main__":
    if sys.argv[1] == "--anomaly":
        anomaly(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
