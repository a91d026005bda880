#!/usr/bin/env python3
"""Invariant labels a grep can resolve (`make check-labels`, part of `make check`).

Letters repeat across files (log.c's L3 is not cluster_leaders.c's L3), so a
label is defined in the opening note of one file, on a comment line of its
own:

     *   L3. A batch becomes readable ...

and cited either bare, in that same file, or with the file named just
before it, in any file: `segments/log.c L3`, `log.c's L3`, `(repl_isr.c I1,
I4)`.  Basenames are unique in the tree, so `grep -n 'L3\\.' segments/log.c`
(or `git ls-files '*/log.c'` first) always finds the one definition.

Fails, naming file:line, on
  - a bare label the file does not define (whose is it?);
  - a label cited with a file that does not define it;
  - a label defined twice in one file.
Reads the comments of C sources and headers and the comments and docstrings
of tests/integration/*.py; code and string literals are not labels.
"""
import os
import re
import subprocess
import sys

LABEL = r"[A-Z][0-9]{1,2}"
# A definition: a comment line (not its opening) that starts with the label
# and a '.' ("  *   L3. A batch ...") or two spaces ("#   P1  the ports").
DEF_RE = re.compile(r"^\s*(?:\*|//|#)?\s*(" + LABEL + r")(?:\.\s|\s\s)")
CITE_RE = re.compile(r"(?<![\w.\-/])(" + LABEL + r")(?![\w\-])")
FILE_RE = re.compile(r"([\w/]+\.(?:c|h|py))\b")
# What may stand between a file's name and the labels it qualifies: other
# labels, ranges and small words ("log.c's L1, L2 and L4", "repl_isr.c
# invariants I1-I3").
BETWEEN_RE = re.compile(r"^(?:['’]s|\s|\*|#|,|;|/|and|or|invariants?|inv\.|–|-|"
                        + LABEL + r"|\(|\))*$")

# A file named just after the labels it qualifies: "(I4 in index.c)",
# "(C1, C2, C5-C7: group_persist.c)".
AFTER_RE = re.compile(r"^(?:\s|,|–|-|and|" + LABEL + r")*(?:\bin|\bof|:)\s+([\w/]+\.(?:c|h|py))\b")

# Tokens of the label shape that are not labels, and why.
NOT_LABELS = {
    "V0", "V1", "V2", "V3",     # message-set / RecordBatch magic ("magic V2")
    "T0",                       # a time origin in tests ("at T0, T0+1s")
}

SOURCE_DIRS = ("daemon", "segments", "metadata", "protocol", "admin", "clients",
               "libsluice", "bench", "examples", "tests/unit", "tests/fuzz")


def c_comments(text):
    """(line number, comment text) for each line holding comment text."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for k, part in enumerate(text[i:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i:end]))
            i = end
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def py_comments(text):
    """(line number, text) of # comments and of triple-quoted strings."""
    out = []
    in_doc = None
    for no, raw in enumerate(text.split("\n"), 1):
        if in_doc:
            out.append((no, raw))
            if in_doc in raw:
                in_doc = None
            continue
        s = raw.strip()
        for q in ('"""', "'''"):
            if q in s:
                out.append((no, raw))
                if s.count(q) == 1:
                    in_doc = q
                break
        else:
            if "#" in raw:
                out.append((no, raw[raw.index("#"):]))
    return out


def tracked_files(root):
    try:
        names = subprocess.run(["git", "ls-files"], cwd=root, check=True,
                               capture_output=True, text=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        names = [os.path.relpath(os.path.join(d, f), root)
                 for d, _, fs in os.walk(root) for f in fs]
    out = []
    for p in names:
        if p.endswith((".c", ".h")) and p.startswith(SOURCE_DIRS):
            out.append(p)
        elif p.startswith(("tests/integration/", "protocol/")) and p.endswith(".py"):
            out.append(p)
    return sorted(out)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = tracked_files(root)
    comments = {}
    defs = {}                       # path -> {label: line}
    by_base = {}                    # basename -> path
    errors = []
    for p in files:
        with open(os.path.join(root, p), encoding="utf-8", errors="replace") as f:
            text = f.read()
        comments[p] = py_comments(text) if p.endswith(".py") else c_comments(text)
        by_base.setdefault(os.path.basename(p), p)
        d = defs.setdefault(p, {})
        for no, t in comments[p]:
            m = DEF_RE.match(t)
            if m and m.group(1) not in NOT_LABELS:
                if m.group(1) in d:
                    errors.append("%s:%d: %s defined again (first at line %d)"
                                  % (p, no, m.group(1), d[m.group(1)]))
                d.setdefault(m.group(1), no)
    for p in files:
        prev, prev_no = "", 0
        for no, t in comments[p]:
            m = DEF_RE.match(t)
            start = m.end(1) if m and m.group(1) not in NOT_LABELS else 0
            # The previous line of the same comment carries a file name over
            # a line break.
            cont = prev_no == no - 1 and not re.match(r"\s*/[*/]", t)
            joined = (prev if cont else "") + " " + t
            off = len(joined) - len(t)
            for c in CITE_RE.finditer(t, start):
                label = c.group(1)
                if label in NOT_LABELS:
                    continue
                before = joined[:off + c.start()]
                owner = None
                for fm in FILE_RE.finditer(before):
                    if BETWEEN_RE.match(before[fm.end():]):
                        owner = fm.group(1)
                am = AFTER_RE.match(t[c.end():])
                if owner is None and am:
                    owner = am.group(1)
                if owner is None:
                    if label not in defs[p]:
                        errors.append("%s:%d: %s is not defined in this file: name the "
                                      "file that defines it (e.g. `log.c L3`)"
                                      % (p, no, label))
                    continue
                target = by_base.get(os.path.basename(owner))
                if target is None:
                    continue        # a file outside the checked sources
                if label not in defs[target]:
                    errors.append("%s:%d: %s cited as %s's, which does not define it"
                                  % (p, no, label, owner))
            prev, prev_no = t, no
    for e in errors:
        print(e)
    if errors:
        print("check_labels: %d ambiguous or unresolvable label(s) in %d files"
              % (len(errors), len(files)), file=sys.stderr)
        return 1
    print("check_labels: labels in %d files resolve" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
