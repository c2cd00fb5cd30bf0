"""The README is a front page and docs/ holds the rest: the README stays short, links every docs/
page, every relative link in the README and docs/ resolves to a file, and the README's headline
table carries the committed experiment report's numbers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"
MAX_README_LINES = 150

FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def markdown_pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def link_targets(text: str) -> list[str]:
    """Link and image targets of a markdown text, outside fenced blocks and inline code."""
    prose = INLINE_CODE.sub("", FENCED.sub("", text))
    return LINK.findall(prose)


def relative_file_links(page: Path) -> list[tuple[str, Path]]:
    """(target as written, resolved file) of every relative link of a page, fragments stripped."""
    found = []
    for target in link_targets(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # http(s), mailto and the like; anchors within the page
        path = target.split("#", 1)[0].split("?", 1)[0]
        found.append((target, (page.parent / path).resolve()))
    return found


def table_after(text: str, heading: str) -> list[dict[str, str]]:
    """The first markdown table after `heading`, as one dict per body row keyed by header cell."""
    start = text.index(heading)
    lines = text[start:].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    header, body = rows[0], rows[2:]
    assert set("".join(rows[1])) <= set("-:| "), f"no separator row under the table after {heading!r}"
    return [dict(zip(header, row)) for row in body]


# ---- the tests -----------------------------------------------------------------------------------


def test_link_parser_sees_links_not_code() -> None:
    text = (
        "See [a](a.md), ![img](b.png \"title\") and [c](c.md#part).\n"
        "`[d](d.md)` is code\n```\n[e](e.md)\n```\n[f](https://x.org/y) [g](#anchor)\n"
    )
    assert link_targets(text) == ["a.md", "b.png", "c.md#part", "https://x.org/y", "#anchor"]


def test_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    pages = sorted(DOCS.glob("*.md"))
    assert pages, "docs/ holds no markdown page"
    linked = {resolved for _, resolved in relative_file_links(README)}
    missing = [page.relative_to(REPO_ROOT).as_posix() for page in pages if page.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken = [target for target, resolved in relative_file_links(page) if not resolved.exists()]
    assert not broken, f"{page.relative_to(REPO_ROOT)}: links to missing files {broken}"
    # a clean clone has only what git keeps: a link to a pipeline output (ignored by git) would break there
    ignored = [
        target
        for target, resolved in relative_file_links(page)
        if resolved.is_file()
        and subprocess.run(["git", "check-ignore", "-q", str(resolved)], check=False, cwd=REPO_ROOT).returncode == 0
    ]
    assert not ignored, f"{page.relative_to(REPO_ROOT)}: links to files git ignores {ignored}"


def test_docs_pages_start_with_a_title_and_link_back() -> None:
    for page in sorted(DOCS.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        assert lines and lines[0].startswith("# "), f"{page.name} does not start with a '# ' title"
        head = "\n".join(lines[:5])
        assert "](../README.md)" in head, f"{page.name} has no link back to the README near its top"


def test_readme_headline_table_matches_the_experiment_report() -> None:
    """The table under "Headline result" copies the results of the experiment report that section links."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Headline result") :].split("\n## ", 1)[0]
    linked = re.findall(r"\]\((reports/[\w./-]+\.md)\)", section)
    assert linked, "the README's headline section links no report under reports/"
    source = REPO_ROOT / linked[0]
    readme = table_after(section, "## Headline result")
    report = {
        row["estimator"]: row for row in table_after(source.read_text(encoding="utf-8"), "## Results (test split)")
    }
    assert readme, "the README's headline table has no rows"
    assert {row["estimator"] for row in readme} == set(report), "the tables list different estimators"
    compared = 0
    for row in readme:
        for column, value in row.items():
            if column == "estimator":
                continue
            assert column in report[row["estimator"]], f"column {column!r} is not in {linked[0]}"
            assert value == report[row["estimator"]][column], (
                f"{row['estimator']} {column}: README {value!r}, {linked[0]} {report[row['estimator']][column]!r}"
            )
            compared += 1
    assert "Success" in readme[0] and compared >= 2 * len(readme)
