"""Every relative link in the README, CONTRIBUTING, CHANGELOG, docs/ and the evidence READMEs points at a file and
heading that exist.

The manual lives in docs/, one page per subject, linked from the README: a renamed heading or a moved file must
fail here, not on GitHub in front of a reader.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs.markdown import DOCS, README, ROOT, anchors, links, pages, slug, split_fences

PAGES = pages()
EVIDENCE = sorted((ROOT / "reports").glob("**/README.md"))  # each evidence folder's, and the index
# The README is the front door: a manual's worth of text belongs in docs/ (issue #29).
README_MAX_BYTES = 12_000


def _relative(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = _broken_links(page)
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", EVIDENCE, ids=_relative)
def test_every_link_of_an_evidence_readme_resolves(page: Path) -> None:
    """A file packed into an archive (tools/pack_evidence.py) must not leave a README linking to it (issue #53)."""
    broken = _broken_links(page)
    assert not broken, "\n".join(broken) + "\n(a packed file: name the archive and its member instead of linking)"


def _broken_links(page: Path) -> list[str]:
    broken = []
    for line, target in links(page.read_text(encoding="utf-8")):
        if ":" in target.split("/")[0]:  # https:, mailto: — not ours to check offline
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path_part)).resolve() if path_part else page
        where = f"{_relative(page)}:{line}: {target}"
        if not dest.is_relative_to(ROOT):
            broken.append(f"{where} leaves the repository")
        elif not dest.exists():
            broken.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            broken.append(f"{where}: no heading with anchor #{anchor} in {_relative(dest)}")
    return broken


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in links(README.read_text())}
    orphans = [_relative(page) for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"


def test_the_readme_stays_a_front_door() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes (at most {README_MAX_BYTES}): move detail to docs/"


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Sessions (`nox -l`)", "sessions-nox--l"),
        (
            "Triage: a script from an issue, or a package's own tests",
            "triage-a-script-from-an-issue-or-a-packages-own-tests",
        ),
        ("torchvision: the GAN's data pipeline", "torchvision-the-gans-data-pipeline"),
        ("[Unreleased]", "unreleased"),
    ],
)
def test_anchors_are_made_as_github_makes_them(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_links_and_headings_inside_code_blocks_are_not_read() -> None:
    text = "# Title\n\n```bash\n# a comment, not a heading\necho '[x](missing.md)'\n```\n\n[ok](#title)\n"
    assert anchors(text) == {"title"}
    assert links(text) == [(8, "#title")]
    assert [block.lang for block in split_fences(text)[1]] == ["bash"]


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert anchors("## Fixes\n\n## Fixes\n") == {"fixes", "fixes-1"}
