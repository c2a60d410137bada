"""The command blocks of a Markdown file, as docs.bats runs them.

Every ```sh block carries a marker line just before it, an HTML comment a reader does not see:
  <!-- docs.bats: run -->                          run as written
  <!-- docs.bats: run (in a folder with a copy of examples/ ...) -->
                                                   run as written where examples/ is at hand
  <!-- docs.bats: run once the jobs have ended -->  run once the user's jobs have left the queue
  <!-- docs.bats: run as typed ... -->             its lines on the shell's standard input, as
                                                   typed (salloc's shell reads the lines after it)
  <!-- docs.bats: not run: REASON -->              not run, and why

  doc_blocks.py split FILE OUTDIR [SECTION]  write the run blocks (of the '## SECTION...' part
                                             only, when given) as OUTDIR/NN.sh, in order, each
                                             with its marker in OUTDIR/NN.marker
  doc_blocks.py unmarked FILE...             print FILE:LINE of every ```sh block without a marker
  doc_blocks.py links FILE...                print FILE:LINE of every relative link (outside code)
                                             whose file or folder does not exist, or whose
                                             #anchor names no heading of the Markdown file
  doc_blocks.py unlinked README DOC...       print every DOC that README does not link
"""
import os
import re
import sys

MARKER = re.compile(r"^<!-- docs\.bats: (.*) -->$")


def blocks(path):
    """(line number, marker or None, section, text) of every ```sh block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    section, i = "", 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:]
        if lines[i].strip() == "```sh":
            m = MARKER.match(lines[i - 1]) if i > 0 else None
            end = lines.index("```", i + 1)
            yield i + 1, m.group(1) if m else None, section, "\n".join(lines[i + 1:end])
            i = end
        i += 1


def split(path, outdir, section=None):
    n = len([f for f in os.listdir(outdir) if f.endswith(".sh")])
    for _, marker, sec, text in blocks(path):
        if marker is None or not marker.startswith("run"):
            continue
        if section is not None and not sec.startswith(section):
            continue
        n += 1
        with open(os.path.join(outdir, f"{n:02d}.sh"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        with open(os.path.join(outdir, f"{n:02d}.marker"), "w", encoding="utf-8") as f:
            f.write(marker + "\n")


LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose_lines(path):
    """(line number, text) of every line outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(open(path, encoding="utf-8").read().split("\n"), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def link_targets(path):
    """(line number, file, anchor) of every relative link; file is "" for a link within the page."""
    for n, line in prose_lines(path):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            yield n, file, anchor


def anchors(path):
    """The #anchors of a Markdown file's headings, as GitHub makes them."""
    found = set()
    for _, line in prose_lines(path):
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def broken_links(paths):
    bad = []
    for p in paths:
        for n, file, anchor in link_targets(p):
            target = os.path.join(os.path.dirname(p), file) if file else p
            if not os.path.exists(target):
                bad.append(f"{p}:{n}: {file}: no such file")
            elif anchor and target.endswith(".md") and anchor not in anchors(target):
                bad.append(f"{p}:{n}: {file}#{anchor}: no such heading")
    return bad


def unlinked(readme, docs):
    linked = {os.path.normpath(os.path.join(os.path.dirname(readme), f)) for _, f, _ in link_targets(readme) if f}
    return [d for d in docs if os.path.normpath(d) not in linked]


def main(argv):
    if len(argv) >= 4 and argv[1] == "split":
        split(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
        return 0
    if len(argv) >= 3 and argv[1] == "unmarked":
        bad = [f"{p}:{n}" for p in argv[2:] for n, marker, _, _ in blocks(p) if marker is None]
        print("\n".join(bad))
        return 1 if bad else 0
    if len(argv) >= 3 and argv[1] == "links":
        bad = broken_links(argv[2:])
        print("\n".join(bad))
        return 1 if bad else 0
    if len(argv) >= 4 and argv[1] == "unlinked":
        bad = unlinked(argv[2], argv[3:])
        print("\n".join(bad))
        return 1 if bad else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
