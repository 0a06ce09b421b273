"""Proof links cannot rot: every ``docs/proofs/<file>.md §N`` (or ``section N``) cited in
the release and robust code names an existing file with a heading numbered N."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITE = re.compile(r"(?:docs/proofs/)?([a-z_]+)\.md,?\s+(?:§\s?|section\s+)(\d+(?:\.\d+)*)")


def _citations() -> list[tuple[str, str, str]]:
    out = []
    for pkg in ("release", "robust"):
        for f in sorted((ROOT / "src" / "dpsieve" / pkg).glob("*.py")):
            for m in CITE.finditer(f.read_text()):
                out.append((f.name, m.group(1), m.group(2)))
    return out


def test_every_cited_proof_section_exists() -> None:
    cites = _citations()
    assert len(cites) >= 15
    bad = []
    for src, doc, sec in cites:
        path = ROOT / "docs" / "proofs" / f"{doc}.md"
        if not path.exists():
            bad.append(f"{src}: {doc}.md missing")
            continue
        heading = re.compile(rf"^#+ {re.escape(sec)}[. ]", re.MULTILINE)
        if not heading.search(path.read_text()):
            bad.append(f"{src}: {doc}.md has no section {sec}")
    assert not bad, bad
