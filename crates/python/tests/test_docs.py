"""The guide page's Python blocks (```python in docs/src/python.md) run as written, from a
folder that has the repository's data/ and weights/ (```python,pyg blocks need PyG: not run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "src" / "python.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
BLOCKS = BLOCK.findall(PAGE.read_text())


def test_the_page_has_python_blocks():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_guide_block_runs(tmp_path, code):
    for folder in ("data", "weights"):
        os.symlink(ROOT / folder, tmp_path / folder)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "a guide example prints its result"
