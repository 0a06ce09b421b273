"""Write one named section of benchmarks/results/system.md, keeping the others."""

from __future__ import annotations

import re
from pathlib import Path

PATH = Path(__file__).resolve().parent / "results" / "system.md"


def write_section(name: str, body: str) -> None:
    PATH.parent.mkdir(parents=True, exist_ok=True)
    text = PATH.read_text() if PATH.exists() else "## System: ledger, service, session\n"
    block = f"<!-- {name} -->\n{body.rstrip()}\n<!-- /{name} -->"
    pat = re.compile(rf"<!-- {re.escape(name)} -->.*?<!-- /{re.escape(name)} -->", re.S)
    text = pat.sub(lambda _: block, text) if pat.search(text) else text.rstrip() + "\n\n" + block
    PATH.write_text(text.rstrip() + "\n")
