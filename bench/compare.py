#!/usr/bin/python3
"""compare.py CURRENT [PREVIOUS] [--targets bench/targets.tsv]: make bench's figures against their
targets and against the previous run. compare.py --verdict KEY VALUE [PEER]: one figure's target
and whether it is met ("target verdict", for a table row).

CURRENT and PREVIOUS are results files (bench/results.sh: one figure a line, key TAB value TAB
peer). Each figure is measured as its row of the targets table says (its kind); a figure is
marked FELL when that measure is more than 20% worse than in PREVIOUS, and NOT MET when it misses
its target. Prints one line a figure, then a summary line; exits 0 (marks are a report, not a
failure of the run)."""
import argparse
import sys

WORSE_BY = 0.20
HIGHER_IS_BETTER = {"ratio": True, "speedup": True, "over": False, "seconds": False, "fraction": False, "cores": False,
                    "share": True, "count": False}


def read_targets(path):
    targets = {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        key, kind, target, what = line.rstrip("\n").split("\t")
        if kind not in HIGHER_IS_BETTER:
            raise SystemExit(f"{path}: {key}: unknown kind {kind!r}")
        bound = None
        if target != "-":
            op, number = target.split()
            if op not in (">=", "<="):
                raise SystemExit(f"{path}: {key}: target {target!r}: expected '>= N', '<= N' or '-'")
            bound = (op, float(number))
        targets[key] = {"kind": kind, "bound": bound, "what": what}
    return targets


def read_results(path):
    results = {}
    for line in open(path, encoding="utf-8"):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 2 or not fields[0]:
            continue
        value = float(fields[1])
        peer = float(fields[2]) if len(fields) > 2 and fields[2] else None
        results[fields[0]] = (value, peer)
    return results


def measure(kind, value, peer):
    """The figure as its kind measures it; None when its peer is missing or zero."""
    if kind in ("seconds", "cores", "share", "count"):
        return value
    if peer is None:
        return None
    if kind == "over":
        return value - peer
    if kind == "speedup":
        return peer / value if value else None
    return value / peer if peer else None


def fell(kind, now, before):
    """True when `now` is more than WORSE_BY worse than `before`."""
    if now is None or before is None:
        return False
    if HIGHER_IS_BETTER[kind]:
        return now < before * (1 - WORSE_BY)
    # Lower is better: worse by more than 20% of the earlier figure's size.
    return now - before > WORSE_BY * abs(before)


def meets(bound, m):
    op, number = bound
    return m >= number if op == ">=" else m <= number


def report(current, previous, targets):
    """One line a figure of `current` that the targets table knows, and the counts of marks."""
    lines, fallen, missed = [], 0, 0
    for key, (value, peer) in current.items():
        if key not in targets:
            continue
        t = targets[key]
        m = measure(t["kind"], value, peer)
        marks = []
        before = None
        if key in previous:
            before = measure(t["kind"], *previous[key])
            if fell(t["kind"], m, before):
                marks.append("FELL")
                fallen += 1
        if t["bound"] is not None and (m is None or not meets(t["bound"], m)):
            marks.append(f"NOT MET ({t['bound'][0]} {t['bound'][1]:g})")
            missed += 1
        now_text = "?" if m is None else f"{m:.3g}"
        before_text = "-" if before is None else f"{before:.3g}"
        lines.append(f"{key:<16} {t['kind']:<9} {now_text:>9} (previous {before_text:>7})  {' '.join(marks) or 'ok'}"
                     f"  {t['what']}")
    return lines, fallen, missed


def verdict(targets, key, value, peer):
    """The target's text and "met", "NOT MET" or "-" (no target) for one figure."""
    t = targets[key]
    if t["bound"] is None:
        return "-", "-"
    m = measure(t["kind"], value, peer)
    op, number = t["bound"]
    return f"{op} {number:g}", "met" if m is not None and meets(t["bound"], m) else "NOT MET"


def main(argv):
    if len(argv) >= 3 and argv[0] == "--targets" and argv[2] == "--verdict":
        argv = ["--verdict", "--targets", argv[1]] + argv[3:]
    if argv and argv[0] == "--verdict":
        targets_path = "bench/targets.tsv"
        args = argv[1:]
        if len(args) >= 2 and args[0] == "--targets":
            targets_path, args = args[1], args[2:]
        key, value = args[0], float(args[1])
        peer = float(args[2]) if len(args) > 2 and args[2] else None
        print(" ".join(verdict(read_targets(targets_path), key, value, peer)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("current")
    parser.add_argument("previous", nargs="?")
    parser.add_argument("--targets", default="bench/targets.tsv")
    args = parser.parse_args(argv)
    targets = read_targets(args.targets)
    current = read_results(args.current)
    previous = read_results(args.previous) if args.previous else {}
    lines, fallen, missed = report(current, previous, targets)
    print("\n".join(lines))
    since = f"against {args.previous}" if args.previous else "(no previous results)"
    print(f"{len(lines)} figures: {fallen} fell more than {WORSE_BY:.0%} {since}, {missed} below target")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
