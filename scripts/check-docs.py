#!/usr/bin/env python3
"""Fails when a document names a repository path that does not exist.

usage: scripts/check-docs.py [--root DIR] [FILES...]

FILES default to README.md and docs/*.md under the root (default: the repository this script is
in). A document names a path in two ways:

  * a relative markdown link, [text](path) or [text](path#anchor) (also a reference definition,
    [label]: path), resolved from the document's folder (a leading / from the root); links with
    a scheme (https:, mailto:, ...) and pure #anchor links are skipped;
  * an inline code span that looks like a repository path: it starts with one of PREFIXES and has
    only path characters, maybe a trailing / (a folder) and a :LINE or :Function suffix (dropped),
    resolved from the root. A * makes it a glob, which must match something. Code spans in fenced
    code blocks are skipped: commands there name build outputs a clean checkout lacks.

Each missing path is printed as DOC:LINE: names PATH, which does not exist, and the exit status is
1; otherwise it prints how many paths it checked and exits 0 (2: usage, an unreadable FILE).
Python 3 standard library only.
"""

import argparse
import glob
import os
import re
import sys
import urllib.parse

PREFIXES = ("agent/", "cni-hook/", "tests/", "scripts/", "deploy/", "proto/", "systemd/",
            "examples/", "docs/", "cmake/", ".ci/")

# A path of the repository in a code span: path characters (and * for globs), maybe a folder's /.
PATH_RE = re.compile(r"[A-Za-z0-9_./+*-]+/?")
# What may follow it after a colon: a line (12, 12-20) or a function (Parse, Foo::Bar, ~Foo).
SUFFIX_RE = re.compile(r":[A-Za-z0-9_:~.-]+")
# A fence opens or closes a code block; indented ones too (fences inside list items).
FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# [text](target) or [text](<target>) with an optional title; images ![alt](target) too.
LINK_RE = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
                     r"\(\s*(<[^>\n]*>|[^()\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
# [label]: target, a reference definition (not a footnote, [^1]: text).
REF_DEF_RE = re.compile(r"^ {0,3}\[(?!\^)[^\]]+\]:\s*(<[^>\n]*>|\S+)")
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def default_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_files(root):
    files = []
    if os.path.exists(os.path.join(root, "README.md")):
        files.append(os.path.join(root, "README.md"))
    files.extend(sorted(glob.glob(os.path.join(root, "docs", "*.md"))))
    return files


def split_fences(lines):
    """Yields (line_number, text, in_fence) for every line; fence lines count as in the fence."""
    fence = None
    for number, line in enumerate(lines, 1):
        m = FENCE_RE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                yield number, line, True
                continue
            yield number, line, False
        else:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                fence = None
            yield number, line, True


def code_spans(text):
    """The code spans of text (a paragraph's lines joined by newlines), CommonMark's way: a run of
    backticks opens a span that the next run of the same length closes. Yields (start, end,
    content): start and end are the offsets of the opening run and just past the closing one."""
    runs = [(m.start(), len(m.group(0))) for m in re.finditer(r"`+", text)]
    i = 0
    while i < len(runs):
        start, length = runs[i]
        for j in range(i + 1, len(runs)):
            if runs[j][1] == length:
                content = text[start + length:runs[j][0]]
                yield start, runs[j][0] + length, content
                i = j + 1
                break
        else:
            i += 1


def paragraphs(marked):
    """Groups the lines outside fenced blocks into blocks split at blank lines and fences (a code
    span crosses neither). Takes split_fences' triples; yields lists of (line_number, line)."""
    block = []
    for number, line, in_fence in marked:
        if line.strip() and not in_fence:
            block.append((number, line))
            continue
        if block:
            yield block
            block = []
    if block:
        yield block


def line_of(block, offset):
    """The line number of offset in the block's text ('\n'.join of its lines)."""
    pos = 0
    for number, line in block:
        if offset <= pos + len(line):
            return number
        pos += len(line) + 1
    return block[-1][0]


def path_of_span(content):
    """The repository path a code span names, or None when it does not look like one."""
    span = content.strip()
    if not span.startswith(PREFIXES):
        return None
    m = PATH_RE.match(span)
    if not m:
        return None
    rest = span[m.end():]
    if rest and not SUFFIX_RE.fullmatch(rest):
        return None
    return m.group(0)


def exists(path, is_glob):
    if is_glob:
        return bool(glob.glob(path, recursive=True))
    if path.endswith("/"):
        return os.path.isdir(path)
    return os.path.exists(path)


def link_targets(text):
    """The targets of the links in text (inline links, and reference definitions per line)."""
    for m in LINK_RE.finditer(text):
        yield m.start(), m.group(1)
    pos = 0
    for line in text.split("\n"):
        m = REF_DEF_RE.match(line)
        if m:
            yield pos, m.group(1)
        pos += len(line) + 1


def resolve_link(target, folder, root):
    """The path a link target names, resolved, or None when it names no file of ours."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or target.startswith("#") or SCHEME_RE.match(target):
        return None
    path = urllib.parse.unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not path:
        return None
    if path.startswith("/"):
        return path, os.path.join(root, path.lstrip("/"))
    return path, os.path.join(folder, path)


def mentions(doc, root):
    """Yields (line, written, resolved) for every path the document names, in document order."""
    with open(doc, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    folder = os.path.dirname(doc)
    marked = list(split_fences(lines))
    found = []

    # Links in fenced blocks (checked, though there should be none).
    for number, line, in_fence in marked:
        if in_fence:
            for _, target in link_targets(line):
                named = resolve_link(target, folder, root)
                if named:
                    found.append((number, *named))

    for block in paragraphs(marked):
        text = "\n".join(line for _, line in block)
        masked = list(text)
        # (b) code spans that look like repository paths, from the root.
        for offset, end, content in code_spans(text):
            path = path_of_span(content)
            if path is not None:
                found.append((line_of(block, offset), path, os.path.join(root, path)))
            # A link inside a code span is text, not a link.
            for k in range(offset, end):
                if masked[k] != "\n":
                    masked[k] = " "
        # (a) links, from the document's folder.
        for offset, target in link_targets("".join(masked)):
            named = resolve_link(target, folder, root)
            if named:
                found.append((line_of(block, offset), *named))
    found.sort(key=lambda f: f[0])
    return found


def display(doc, root):
    rel = os.path.relpath(doc, root)
    return doc if rel.startswith("..") else rel


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Fails when a document names a repository path that does not exist.")
    parser.add_argument("--root", default=default_root(),
                        help="the repository root (default: the one this script is in)")
    parser.add_argument("files", nargs="*", metavar="FILES",
                        help="documents to check (default: README.md and docs/*.md of the root)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        print(f"check-docs: --root {args.root} is not a folder", file=sys.stderr)
        return 2
    files = [os.path.abspath(f) for f in args.files] or default_files(root)

    checked = 0
    missing = []
    for doc in files:
        try:
            found = list(mentions(doc, root))
        except (OSError, UnicodeDecodeError) as e:
            print(f"check-docs: cannot read {doc}: {e}", file=sys.stderr)
            return 2
        for number, written, resolved in found:
            checked += 1
            if not exists(resolved, "*" in written):
                missing.append(f"{display(doc, root)}:{number}: names {written}, "
                               "which does not exist")
    for line in missing:
        print(line)
    if missing:
        return 1
    print(f"docs: {checked} paths checked in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
