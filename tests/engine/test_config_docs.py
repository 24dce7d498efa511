"""docs/configuration.md shows the real defaults: its example loads to `Config()`."""

from __future__ import annotations

import re
from pathlib import Path

from agentrio.engine.config import Config, load_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_documented_defaults_are_the_real_defaults(tmp_path: Path) -> None:
    """Every key of docs/configuration.md's first example, with its documented value,
    is accepted and equals the built-in default."""
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    (tmp_path / "config.toml").write_text(block.group(1))
    assert load_config(tmp_path) == Config(home=str(tmp_path))
