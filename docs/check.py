#!/usr/bin/env python3
"""Checks the README and the user guide (docs/src); Python 3 standard library only.

    python3 docs/check.py          links, anchors, fence labels, the book's table of contents
    python3 docs/check.py --run    the same, then runs every ```sh block (bash -euo pipefail,
                                   from the repository root, in file order, each distinct
                                   block once; --skip COMMAND leaves one out)

What it checks, in README.md and docs/src/**/*.md:
- every relative link resolves: the file or folder exists, and a `#anchor` names a heading
  of the target page (ids as mdBook makes them: lower case, spaces to `-`, only letters,
  digits, `-` and `_` kept; a repeated heading gets `-1`, `-2`, ...);
- every fenced code block carries one of the labels below, so that no block is a command
  nobody runs:
    sh         a command CI runs as written (`--run`); keep it cheap: CPU, small sizes
    sh,gpu     needs a GPU (or several): shown, never run here
    rust       a doctest: README.md is the crate's doc (src/lib.rs), each guide page that has
               one is included into src/lib.rs under #[cfg(doctest)]
    text, toml, json   output, layouts and config samples: not commands
    python     Python using the `gnn` package: the package's pytest suite runs it
               (crates/python/tests/test_docs.py), from a folder with `data/` and `weights/`
    python,pyg Python that needs PyG installed: shown, never run here
    python,gpu Python that needs a GPU (or several): shown, never run here
- SUMMARY.md lists every page of docs/src and every page it lists exists;
- every guide page with a ```rust block is hooked into src/lib.rs (else it would not run);
- README.md stays within 200 lines.

Exit status 0 when all is well, 1 with one line per problem otherwise.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK_SRC = ROOT / "docs" / "src"
README_MAX_LINES = 200
LABELS = {"sh", "sh,gpu", "rust", "text", "toml", "json", "python", "python,pyg", "python,gpu"}
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n)[\s\S])+?)\1")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


class Page:
    """One Markdown file split into fenced blocks and the prose lines outside them."""

    def __init__(self, path):
        self.path = path
        self.rel = path.relative_to(ROOT)
        self.blocks = []  # (first line number, label, text)
        self.prose = []  # (line number, line)
        self.problems = []
        open_fence = None
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = FENCE.match(line)
            if open_fence is None:
                if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                    open_fence = (m.group(2), m.group(3).strip(), n, [])
                else:
                    self.prose.append((n, line))
            elif m and m.group(2)[0] == open_fence[0][0] and len(m.group(2)) >= len(
                open_fence[0]
            ) and not m.group(3).strip():
                self.blocks.append((open_fence[2], open_fence[1], "\n".join(open_fence[3])))
                open_fence = None
            else:
                open_fence[3].append(line)
        if open_fence is not None:
            self.problems.append(f"{self.rel}:{open_fence[2]}: code block never closed")

    def heading_ids(self):
        """The ids mdBook gives this page's headings, in order."""
        used, ids = set(), []
        for _, line in self.prose:
            m = HEADING.match(line)
            if not m:
                continue
            text = heading_text(m.group(2))
            base = "".join(
                c if (c.isalnum() or c in "_-") else "-" if c.isspace() else ""
                for c in text.strip().lower()
            )
            hid, k = base, 0
            while hid in used:
                k += 1
                hid = f"{base}-{k}"
            used.add(hid)
            ids.append(hid)
        return ids


def heading_text(md):
    """A heading's text as rendered: code spans keep their content, link and emphasis
    markup goes (`_` only at word boundaries, as CommonMark reads it)."""
    md = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", md)
    out = []
    for k, part in enumerate(re.split(r"(`+[^`]*`+)", md)):
        if k % 2:
            out.append(part.strip("`").strip())
        else:
            part = re.sub(r"\*{1,3}(\S(?:.*?\S)?)\*{1,3}", r"\1", part)
            out.append(re.sub(r"(?<!\w)_{1,3}(\S(?:.*?\S)?)_{1,3}(?!\w)", r"\1", part))
    return "".join(out)


def links(page):
    """(line number, target) of every link outside code blocks and code spans; a link's
    text may wrap over lines."""
    lines = dict(page.prose)
    last = max(lines, default=0)
    text = "\n".join(lines.get(n, "") for n in range(1, last + 1))
    text = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    for m in INLINE_LINK.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)
    for n, line in enumerate(text.split("\n"), 1):
        m = REF_DEF.match(line)
        if m:
            yield n, m.group(1)


def pages():
    out = [ROOT / "README.md"]
    out += sorted(BOOK_SRC.rglob("*.md"))
    return [Page(p) for p in out]


def check_links(all_pages):
    by_path = {p.path: p for p in all_pages}
    problems = []
    for page in all_pages:
        for n, target in links(page):
            if EXTERNAL.match(target) or target.startswith("//"):
                continue
            path_part, _, anchor = target.partition("#")
            if path_part:
                dest = (page.path.parent / path_part).resolve()
                if not dest.exists():
                    problems.append(f"{page.rel}:{n}: broken link `{target}`: no {path_part}")
                    continue
            else:
                dest = page.path
            if not anchor:
                continue
            if dest.suffix != ".md" or dest.is_dir():
                problems.append(f"{page.rel}:{n}: anchor on a non-Markdown target `{target}`")
                continue
            target_page = by_path.get(dest) or Page(dest)
            if anchor not in target_page.heading_ids():
                problems.append(
                    f"{page.rel}:{n}: broken anchor `{target}`: "
                    f"{dest.relative_to(ROOT)} has no heading with id `{anchor}`"
                )
    return problems


def check_labels(all_pages):
    problems = []
    for page in all_pages:
        for n, label, _ in page.blocks:
            if label not in LABELS:
                shown = label or "(none)"
                problems.append(
                    f"{page.rel}:{n}: code block labelled `{shown}`; use one of "
                    + ", ".join(sorted(LABELS))
                )
    return problems


def check_summary(all_pages):
    summary = BOOK_SRC / "SUMMARY.md"
    if not summary.is_file():
        return [f"{summary.relative_to(ROOT)}: missing"]
    listed = set()
    for n, target in links(Page(summary)):
        dest = (BOOK_SRC / target.partition("#")[0]).resolve()
        listed.add(dest)
    problems = []
    for page in all_pages:
        if page.path.is_relative_to(BOOK_SRC) and page.path.name != "SUMMARY.md":
            if page.path not in listed:
                problems.append(f"{page.rel}: not listed in docs/src/SUMMARY.md")
    return problems


def check_doctest_hooks(all_pages):
    lib = (ROOT / "src" / "lib.rs").read_text(encoding="utf-8")
    problems = []
    for page in all_pages:
        if not page.path.is_relative_to(BOOK_SRC):
            continue
        if any(label == "rust" for _, label, _ in page.blocks):
            hook = f'include_str!("../docs/src/{page.path.relative_to(BOOK_SRC).as_posix()}")'
            if hook not in lib:
                problems.append(
                    f"{page.rel}: has ```rust blocks but src/lib.rs has no "
                    f"#[cfg(doctest)] #[doc = {hook}] hook, so they would never run"
                )
    return problems


def run_blocks(all_pages, timeout, skip):
    """Runs every ```sh block once (a block repeated word for word elsewhere runs once;
    blocks whose text is in `skip` are left to the caller); returns the failures."""
    failures, total, done = [], 0.0, {}
    blocks = [(p, n, text) for p in all_pages for n, label, text in p.blocks if label == "sh"]
    for k, (page, n, text) in enumerate(blocks, 1):
        where = f"{page.rel}:{n}"
        if text.strip() in skip:
            print(f"--- [{k}/{len(blocks)}] {where}: skipped (--skip)", flush=True)
            continue
        if text in done:
            print(f"--- [{k}/{len(blocks)}] {where}: same as {done[text]}, ran once", flush=True)
            continue
        done[text] = where
        print(f"--- [{k}/{len(blocks)}] {where}", flush=True)
        for line in text.splitlines():
            print(f"$ {line}", flush=True)
        t0 = time.monotonic()
        try:
            rc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", text], cwd=ROOT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            rc = f"timeout after {timeout} s"
        dt = time.monotonic() - t0
        total += dt
        print(f"--- {where}: exit {rc} in {dt:.1f} s", flush=True)
        if rc != 0:
            failures.append(f"{where}: ```sh block failed (exit {rc})")
    print(f"ran {len(done)} distinct sh blocks in {total:.1f} s", flush=True)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="also run every ```sh block")
    ap.add_argument(
        "--timeout", type=int, default=1800, help="seconds allowed per sh block (default 1800)"
    )
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="COMMAND",
        help="with --run: leave out the sh blocks whose whole text is COMMAND (for a command "
        "the CI script runs as its own step); repeatable",
    )
    args = ap.parse_args()
    all_pages = pages()
    problems = [p for page in all_pages for p in page.problems]
    problems += check_links(all_pages)
    problems += check_labels(all_pages)
    problems += check_summary(all_pages)
    problems += check_doctest_hooks(all_pages)
    readme_lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    if readme_lines > README_MAX_LINES:
        problems.append(f"README.md: {readme_lines} lines, over {README_MAX_LINES}")
    n_links = sum(1 for p in all_pages for _ in links(p))
    n_blocks = sum(len(p.blocks) for p in all_pages)
    print(f"docs/check.py: {len(all_pages)} pages, {n_links} links, {n_blocks} code blocks")
    if not problems and args.run:
        problems += run_blocks(all_pages, args.timeout, {c.strip() for c in args.skip})
    sys.stdout.flush()
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"docs/check.py: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("docs/check.py: OK")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CARGO_TERM_COLOR", "never")
    sys.exit(main())
