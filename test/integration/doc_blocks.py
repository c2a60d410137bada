"""The command blocks of a Markdown file, as docs.bats runs them.

Every ```sh block carries a marker line just before it, an HTML comment a reader does not see:
  <!-- docs.bats: run -->                          run as written
  <!-- docs.bats: run once the jobs have ended -->  run once the user's jobs have left the queue
  <!-- docs.bats: run as typed ... -->             its lines on the shell's standard input, as
                                                   typed (salloc's shell reads the lines after it)
  <!-- docs.bats: not run: REASON -->              not run, and why

  doc_blocks.py split FILE OUTDIR [SECTION]  write the run blocks (of the '## SECTION...' part
                                             only, when given) as OUTDIR/NN.sh, in order, each
                                             with its marker in OUTDIR/NN.marker
  doc_blocks.py unmarked FILE...             print FILE:LINE of every ```sh block without a marker
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


def main(argv):
    if len(argv) >= 4 and argv[1] == "split":
        split(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
        return 0
    if len(argv) >= 3 and argv[1] == "unmarked":
        bad = [f"{p}:{n}" for p in argv[2:] for n, marker, _, _ in blocks(p) if marker is None]
        print("\n".join(bad))
        return 1 if bad else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
