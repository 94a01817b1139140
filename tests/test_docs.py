"""The README and the pages of docs/: every relative link resolves to a file of the repository and, with a
`#anchor`, to a heading of that page as GitHub names it; docs/README.md lists every page; the README stays a front
page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO

PAGES = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto: leave the repository


def prose(text: str) -> str:
    """The text a reader sees as prose: fenced blocks and code spans hold no links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a page: the heading's text as rendered, lower case, without
    punctuation (letters, digits, `_` and `-` stay), each space a `-`; a repeated slug gets `-1`, `-2`, ..."""
    seen: dict[str, int] = {}
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        yield slug if seen[slug] == 0 else f"{slug}-{seen[slug]}"


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """Each relative link of the page that names no file under root, or no heading of the page it names."""
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_relative_to(root) or not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (file.suffix != ".md" or anchor not in set(anchors(file))):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(root)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.relative_to(REPO)}: " + "; ".join(broken_links(page))


def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## The first GPU: one check of the plan's assumptions\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n[ok](other.md#the-first-gpu-one-check-of-the-plans-assumptions) [self](#page)\n"
                    "[gone](missing.md) [bad](other.md#nowhere) [web](https://example.org/x.md)\n"
                    "`[code](missing.md)`\n\n```\n[fenced](missing.md)\n```\n")
    assert broken_links(page, root=tmp_path) == ["missing.md: no such file",
                                                 "other.md#nowhere: no heading #nowhere in other.md"]


def test_anchors_are_named_as_github_names_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Sokoban training: `sokoban-bench`\n## Tables 5 and 6\n## Tables 5 and 6\n"
                    "## fig3_left, Figs. 14–15\n```\n# not a heading\n```\n")
    assert list(anchors(page)) == ["sokoban-training-sokoban-bench", "tables-5-and-6", "tables-5-and-6-1",
                                   "fig3_left-figs-1415"]


def test_the_docs_index_lists_every_page():
    index = REPO / "docs" / "README.md"
    links = LINK.findall(prose(index.read_text()))
    listed = {(index.parent / target.partition("#")[0]).resolve() for target in links}
    unlisted = [page.name for page in sorted((REPO / "docs").glob("*.md")) if page != index and page not in listed]
    assert not unlisted, f"docs/README.md does not list: {', '.join(unlisted)}"


def test_the_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= 200, f"README.md has {lines} lines: move the detail into a page of docs/ (listed in docs/README.md)"
