"""Every requirement id the code cites is defined in docs/requirements.md, and every
owner module named there exists (the ids' traceability: DEVELOPERS "Tests")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "requirements.md"
CITED_IN = ("engine", "protocol", "repl", "agentrio", "tests", "bench", "examples")
_ROW = re.compile(r"^\| (R\d+) \| (.+?) \| `([^`]+)` \|$", re.M)
_CITE = re.compile(r"\bR\d{1,3}\b")


def _defined() -> dict[str, str]:
    return {rid: owner for rid, _, owner in _ROW.findall(DOC.read_text(encoding="utf-8"))}


def _citations() -> dict[str, set[str]]:
    cited: dict[str, set[str]] = {}
    for folder in CITED_IN:
        for path in sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).is_dir() else []:
            for rid in _CITE.findall(path.read_text(encoding="utf-8")):
                cited.setdefault(rid, set()).add(str(path.relative_to(ROOT)))
    return cited


def test_every_cited_id_is_defined() -> None:
    """The code cites only ids that docs/requirements.md defines."""
    defined = _defined()
    missing = {rid: sorted(paths)[:3] for rid, paths in _citations().items() if rid not in defined}
    assert missing == {}


def test_every_owner_exists() -> None:
    """An owner named in docs/requirements.md is a file of this repository."""
    gone = {rid: owner for rid, owner in _defined().items() if not (ROOT / owner).is_file()}
    assert gone == {}


def test_the_document_defines_each_id_once_in_order() -> None:
    """One row per id, in increasing order, so the page reads as a reference."""
    ids = [int(rid[1:]) for rid, _, _ in _ROW.findall(DOC.read_text(encoding="utf-8"))]
    assert ids == sorted(set(ids))
    assert len(ids) >= 50
