#!/usr/bin/env python3
"""Tests of scripts/check-docs.py: it runs the checker as a process (as ctest and CI do) on
repositories made here, and once on this repository. Python 3 standard library only.

usage: scripts/check-docs_test.py [-v]
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check-docs.py")
REPO = os.path.dirname(HERE)


def run_checker(*args):
    p = subprocess.run([sys.executable, CHECKER, *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def write(root, path, text=""):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as fh:
        fh.write(text)


# A README whose line numbers the expectations below name: keep them in step.
README = textwrap.dedent("""\
    # A project

    The guide: [the guide](docs/GUIDE.md), and [one that is not there](docs/NOPE.md#intro).
    The parser is `agent/real.cc`, its header `agent/real.h` (missing), its function
    `agent/real.cc:ParseThing` and a line of the missing one `agent/gone.cc:42`.
    Tests: `tests/*_test.cc` (some) and `tests/*_bench.cc` (none); the folder `scripts/`, and
    `deploy/` (missing), and a file named as a folder `agent/real.cc/` (not a folder).
    Not paths: `build/agent/x`, `agent/real.cc --flag`, `fabricctl select`, `agent/{a,b}.h`.
    Outside links: [upstream](https://example.com/agent/gone.cc), [mail](mailto:a@example.com),
    [here](#a-project), [http](http://example.com/x).
    A span across lines: `agent/real.cc` and `agent/missing_too.cc` then ``agent/`odd`.cc``
    and `agent/wrapped_missing
    .cc` (two lines: not a path).

    ```sh
    build/agent/binary --flag      # commands name build outputs
    cat `agent/built_output`       # a code span in a fenced block: skipped
    ```

    ~~~
    `agent/also_skipped`
    ~~~

    Last: `cni-hook/gone/`.
    """)

GUIDE = textwrap.dedent("""\
    # Guide

    [back](../README.md), [the code](../agent/real.cc), [gone](../agent/gone.cc#L3),
    [root-relative](/agent/real.h), [folder](../tests/), [a title](../scripts/run.sh "Run").
    Code spans resolve from the root, not from docs/: `agent/real.cc`, `docs/GUIDE.md`.
    [label]: ../agent/ref_missing.cc
    `[not a link](../agent/in_code_span.cc)`
    """)


def make_repo(root):
    write(root, "README.md", README)
    write(root, "docs/GUIDE.md", GUIDE)
    write(root, "agent/real.cc", "// parser\n")
    write(root, "tests/one_test.cc", "// test\n")
    write(root, "scripts/run.sh", "#!/bin/sh\n")


class CheckerOnMadeRepository(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        make_repo(self.root)

    def tearDown(self):
        self.tmp.cleanup()

    def test_reports_exactly_the_missing_paths(self):
        rc, out, err = run_checker("--root", self.root)
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(out.splitlines(), [
            "README.md:3: names docs/NOPE.md, which does not exist",
            "README.md:4: names agent/real.h, which does not exist",
            "README.md:5: names agent/gone.cc, which does not exist",
            "README.md:6: names tests/*_bench.cc, which does not exist",
            "README.md:7: names deploy/, which does not exist",
            "README.md:7: names agent/real.cc/, which does not exist",
            "README.md:11: names agent/missing_too.cc, which does not exist",
            "README.md:24: names cni-hook/gone/, which does not exist",
            "docs/GUIDE.md:3: names ../agent/gone.cc, which does not exist",
            "docs/GUIDE.md:4: names /agent/real.h, which does not exist",
            "docs/GUIDE.md:6: names ../agent/ref_missing.cc, which does not exist",
        ])
        self.assertEqual(err, "")

    def test_passes_once_the_paths_exist(self):
        for path in ("docs/NOPE.md", "agent/real.h", "agent/gone.cc", "tests/a_bench.cc",
                     "agent/missing_too.cc", "agent/ref_missing.cc", "deploy/x",
                     "cni-hook/gone/x"):
            write(self.root, path)
        os.remove(os.path.join(self.root, "agent/real.cc"))
        write(self.root, "agent/real.cc/inside")  # now a folder, as the span says
        rc, out, err = run_checker("--root", self.root)
        self.assertEqual(rc, 0, out + err)
        # README: 2 links and 12 code spans; GUIDE: 7 links (one a reference) and 2 code spans;
        # docs/NOPE.md, now there, names none.
        self.assertEqual(out, "docs: 23 paths checked in 3 files\n")

    def test_files_given_are_the_only_ones_checked(self):
        rc, out, _ = run_checker("--root", self.root, os.path.join(self.root, "docs/GUIDE.md"))
        self.assertEqual(rc, 1)
        self.assertEqual([line.split(":")[0] for line in out.splitlines()], ["docs/GUIDE.md"] * 3)

    def test_no_documents_is_no_failure(self):
        with tempfile.TemporaryDirectory() as empty:
            rc, out, _ = run_checker("--root", empty)
        self.assertEqual((rc, out), (0, "docs: 0 paths checked in 0 files\n"))

    def test_unreadable_file_is_a_usage_error(self):
        rc, _, err = run_checker("--root", self.root, os.path.join(self.root, "no-such.md"))
        self.assertEqual(rc, 2)
        self.assertIn("no-such.md", err)


class CheckerOnThisRepository(unittest.TestCase):
    def test_every_path_the_docs_name_exists(self):
        rc, out, err = run_checker()
        self.assertEqual(rc, 0, "scripts/check-docs.py found paths that do not exist:\n" + out
                         + err)
        self.assertRegex(out, r"^docs: \d+ paths checked in \d+ files\n$")


if __name__ == "__main__":
    unittest.main()
