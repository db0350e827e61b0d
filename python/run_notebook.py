#!/usr/bin/env python3
"""Executes notebooks headless, as a reader would run them top to bottom, and
fails on the first cell that raises (scripts/test.sh runs examples/*.ipynb).

    /usr/bin/python3 python/run_notebook.py examples/induction.ipynb [--timeout S]

Each notebook runs in its own folder with the kernel `python3`; HEADLAB_BUILD
(default: build/) is where the notebook finds the package. Prints each
notebook's wall time; nothing is written back to the notebook."""
import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main():
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger warns about frozen modules otherwise
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="+", type=Path)
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    a = p.parse_args()
    failed = 0
    for path in a.notebooks:
        nb = nbformat.read(path, as_version=4)
        start = time.monotonic()
        client = NotebookClient(nb, timeout=a.timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.resolve().parent)}})
        try:
            client.execute()
            print(f"{path}: ran in {time.monotonic() - start:.1f} s")
        except CellExecutionError as e:
            failed += 1
            print(f"{path}: a cell failed after {time.monotonic() - start:.1f} s:\n{e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
