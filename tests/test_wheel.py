"""What a wheel of dpsieve holds (issue 15, item 4): a typed package (PEP 561 ``py.typed``),
every module, the bundled data, the budget page, the reproductions (they must run from an
installed wheel, not from a checkout's ``experiments/``), the license and the extras the
README documents.

The wheel is built from the checkout without build isolation (offline: the environment's
setuptools). Installing it into a fresh environment and running the README and the
reproductions from there is the slow test in tests/test_docs_examples.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "dpsieve"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(dist), str(ROOT)], check=True, capture_output=True,
                   timeout=600)
    (path,) = dist.glob("dpsieve-*.whl")
    with zipfile.ZipFile(path) as z:
        yield z


def _meta(z: zipfile.ZipFile, name: str) -> str:
    (path,) = [n for n in z.namelist() if n.endswith(f".dist-info/{name}")]
    return z.read(path).decode()


def test_every_module_and_package_file_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    tracked = subprocess.run(["git", "ls-files", "src/dpsieve"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    want = {p.removeprefix("src/") for p in tracked}
    assert want, "no tracked package files"
    assert sorted(want - names) == []
    for f in ("dpsieve/py.typed", "dpsieve/__main__.py", "dpsieve/service/static/index.html",
              "dpsieve/data/diabetes.csv", "dpsieve/data/release_toy.domain.json",
              "dpsieve/reproduce/filters.py", "dpsieve/reproduce/robust.py",
              "dpsieve/reproduce/release.py", "dpsieve/reproduce/training.py"):
        assert f in names, f
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "experiments/"))]


def test_no_shipped_module_needs_a_source_checkout(wheel: zipfile.ZipFile) -> None:
    """The reproduction commands used to load ``experiments/<area>/run.py`` by path."""
    bad = re.compile(r"^\s*(from|import)\s+(experiments|benchmarks|tests)\b|"
                     r"spec_from_file_location", re.M)
    offenders = [n for n in wheel.namelist()
                 if n.endswith(".py") and bad.search(wheel.read(n).decode())]
    assert offenders == []


def test_metadata_license_entry_point_and_extras(wheel: zipfile.ZipFile) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    meta = _meta(wheel, "METADATA")
    assert re.search(r"^License-Expression: Apache-2.0$", meta, re.M) or \
        re.search(r"^License: Apache-2.0$", meta, re.M), meta[:600]
    lic = [n for n in wheel.namelist() if re.search(r"\.dist-info/(licenses/)?LICENSE$", n)]
    assert len(lic) == 1
    assert wheel.read(lic[0]) == (ROOT / "LICENSE").read_bytes()
    assert "dpsieve = dpsieve.cli:main" in _meta(wheel, "entry_points.txt")
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.M))
    assert extras == set(project["optional-dependencies"])
    readme = (ROOT / "README.md").read_text()
    for extra in extras - {"test", "bench"}:  # each user-facing extra is explained
        assert re.search(rf"^\| `{extra}` \|", readme, re.M), extra
