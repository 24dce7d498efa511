"""Fixtures of the gate tests (test_gate.py, test_gate_workdir.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A scratch folder outside ``/tmp`` (the sandbox's ``/tmp`` is private: a write
    there would vanish and prove less), removed after the test."""
    folder = Path(tempfile.mkdtemp(prefix="gate-scratch-", dir=ROOT))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)
