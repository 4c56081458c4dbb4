"""Every relative link in the documentation resolves: README.md, docs/, examples/ and bench/README.md link to files
that exist and, with `#anchor`, to a heading there (GitHub's slugs), so a page moved or a heading renamed fails here."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / "examples").rglob("*.md")])

FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def prose(markdown: str) -> str:
    """The text outside fenced code blocks and code spans: a `[x](y)` in code is no link."""
    return CODE_SPAN.sub("", FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (code marks and link targets dropped), lower case, without
    punctuation other than `-` and `_`, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor in a Markdown file; a repeated heading gets -1, -2... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        found.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` that lead nowhere: a missing file, or an anchor no heading there has."""
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading #{anchor} in {os.path.relpath(linked, page.parent)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_front_page_links_every_docs_page() -> None:
    targets = LINK.findall(prose((ROOT / "README.md").read_text()))
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in targets}
    assert set((ROOT / "docs").rglob("*.md")) - linked == set()


def test_the_checker_finds_a_missing_page_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n## Workflow tools: `ctx.ask()` and `ctx.step()`\n## Step\n## Step\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#workflow-tools-ctxask-and-ctxstep) [b](other.md#step-1) [c](#here) ![d](other.md)\n"
                    "# Here\n[gone](gone.md) [nope](other.md#nope) `[code](gone.md)` [web](https://example.com/x.md)\n"
                    "```\n[fenced](gone.md)\n```\n")
    assert broken_links(page) == ["gone.md: no such file", "other.md#nope: no heading #nope in other.md"]
