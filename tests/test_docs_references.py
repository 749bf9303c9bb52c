"""The README and docs stand on their own: every reference they make resolves in this repository.

* every relative Markdown link and every backticked repository path exists (paths a run writes,
  listed in ``.gitignore``, excepted);
* every rule id (``R-XFER-8``) cited anywhere is explained in ``docs/adk-behaviour.md``, every
  "ARCHITECTURE §n" has its section in ``docs/architecture.md``;
* no user-facing text cites files a user does not have (design notes, issue numbers);
* every class the README names that ``trio_agents`` itself does not export is shown with its
  import path.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest

import trio_agents
from tests.test_exports import PUBLIC_NAMESPACES

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
TRACKED_TOP = {
    line.split("/")[0]
    for line in subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
}
GENERATED = [
    line.strip().rstrip("*")
    for line in (ROOT / ".gitignore").read_text().splitlines()
    if "/" in line and not line.startswith("*")
]
"""Paths a run writes (``benchmarks/results/``): cited, but not in a fresh clone."""

LINK = re.compile(r"\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\s]+)`")
RULE = re.compile(r"(?<![A-Za-z-])R-([A-Z]+)(?:-(\d+))?")
SECTION = re.compile(r"ARCHITECTURE §(\d+)")
FOREIGN = re.compile(
    r"ADK-SEMANTICS|STYLE-ANCHORS|USER-ASKS|PEER-FIGURES|WORKLOADS\.md|\.\./shared|"
    r"\b[Ii]ssues? #?\d+"
)
PUBLIC_MODULES = [name for name in PUBLIC_NAMESPACES if name != "trio_agents"]


def _sources() -> list[Path]:
    """The code a user reads: the library (UI files included) and the benchmarks."""
    files = [*(ROOT / "trio_agents").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    files += [*(ROOT / "trio_agents" / "server" / "ui").glob("*")]
    return sorted(f for f in files if f.is_file())


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _exists(target: str, doc: Path) -> bool:
    target = target.split("#")[0].rstrip("/")
    if not target:
        return True
    if any(target.startswith(g.rstrip("/")) for g in GENERATED):
        return True
    return (ROOT / target).exists() or (doc.parent / target).exists()


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_relative_link_resolves(doc: Path) -> None:
    links = [t for t in LINK.findall(doc.read_text()) if "://" not in t and ":" not in t[:8]]
    assert [t for t in links if not _exists(t, doc)] == []


def _repository_path(token: str) -> bool:
    token = token.rstrip(".,;:")
    if "://" in token or token.startswith(("/", "-", ".venv")) or any(c in token for c in "{*<…|"):
        return False
    first = token.split("/")[0]
    return token.endswith(".md") or ("/" in token and first in TRACKED_TOP)


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_backticked_repository_path_exists(doc: Path) -> None:
    paths = [t.rstrip(".,;:") for t in TICKED.findall(doc.read_text()) if _repository_path(t)]
    assert [p for p in paths if not _exists(p, doc)] == []


def test_the_path_check_sees_what_it_must() -> None:
    """The heuristics above catch a dangling document and a dangling path into the tree."""
    assert _repository_path("bench/WORKLOADS.md")
    assert not _exists("bench/WORKLOADS.md", README)
    assert _repository_path("tests/cli_apps")
    assert not _exists("tests/no_such_dir", README)
    assert _exists("benchmarks/results/latest.md", README)  # written by a run, git-ignored
    assert not _repository_path("sqlite:///s.db")


def _cited_texts() -> list[tuple[str, str]]:
    files = [*DOCS, *_sources(), *sorted((ROOT / "tests").rglob("*.py"))]
    return [(_name(f), f.read_text()) for f in files if f.name != Path(__file__).name]


def test_every_cited_rule_id_is_explained() -> None:
    explained = (ROOT / "docs" / "adk-behaviour.md").read_text()
    families = set(re.findall(r"^## (.+)$", explained, re.MULTILINE))
    missing = set()
    for where, text in _cited_texts():
        for family, number in RULE.findall(text):
            rule = f"R-{family}-{number}" if number else f"R-{family}"
            found = f"| {rule} |" in explained if number else any(rule in h for h in families)
            if not found:
                missing.add((where, rule))
    assert sorted(missing) == []


def test_every_cited_architecture_section_exists() -> None:
    sections = set(
        re.findall(r"^## §(\d+) ", (ROOT / "docs" / "architecture.md").read_text(), re.M)
    )
    cited = {(where, n) for where, text in _cited_texts() for n in SECTION.findall(text)}
    assert sorted((where, n) for where, n in cited if n not in sections) == []


@pytest.mark.parametrize("path", [*DOCS, *_sources()], ids=_name)
def test_no_reference_to_what_a_user_does_not_have(path: Path) -> None:
    assert FOREIGN.findall(path.read_text()) == []


def _submodule_classes() -> dict[str, str]:
    """Public classes of the subpackages that ``trio_agents`` itself does not export."""
    found: dict[str, str] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            if isinstance(getattr(module, name), type) and not hasattr(trio_agents, name):
                found.setdefault(name, module_name)
    return found


def test_the_readme_shows_the_import_path_of_every_class_it_names() -> None:
    text = " ".join(README.read_text().split())  # an import may wrap across lines
    named = set(re.findall(r"`([A-Z][A-Za-z0-9]+)\b", text))
    imported = re.findall(r"from (trio_agents[.\w]*) import \(?((?:(?!\bfrom\b)[\w, ])+)", text)
    shown = {n for _, names in imported for n in re.findall(r"\w+", names)}
    missing = []
    for name, module in sorted(_submodule_classes().items()):
        if name in named and name not in shown and f"{module}.{name}" not in text:
            missing.append(f"{module}.{name}")
    assert missing == []
    assert "import from `trio_agents` itself" in text  # the rule for names shown without one
