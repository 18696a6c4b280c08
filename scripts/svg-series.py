#!/usr/bin/env python3
"""Plots one queue of a replay's predictions: each job's wait and each method's bound
against submit time, log-scaled, as an SVG on standard output (standard library only).

usage: svg-series.py PREDICTIONS.csv QUEUE METHOD[,METHOD...] TITLE > chart.svg

PREDICTIONS.csv is what `qbets replay … --predictions FILE` writes. Jobs without a
prediction from every listed method are left out, as the replay's scoring does.
"""
import csv
import math
import sys
from collections import OrderedDict

COLORS = ["#1f5fbf", "#d9480f", "#2b8a3e", "#862e9c"]
W, H = 900, 420
LEFT, RIGHT, TOP, BOTTOM = 90, 20, 40, 50


def human(s):
    """A duration in seconds as people read it on an axis."""
    if s < 100:
        return f"{s} s"
    if s < 6000:
        return f"{s / 60:.3g} min"
    if s < 200000:
        return f"{s / 3600:.3g} h"
    return f"{s / 86400:.3g} d"


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    path, queue, methods, title = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
    jobs = OrderedDict()
    with open(path, newline="") as f:
        for line, r in enumerate(csv.DictReader(f), start=2):
            if r["queue"] != queue:
                continue
            try:
                job = jobs.setdefault(r["job"], {"submit": int(r["submit"]), "wait": int(r["wait"])})
                if r["method"] in methods and r["prediction"]:
                    job[r["method"]] = float(r["prediction"])
            except ValueError as e:
                sys.exit(f"{path}:{line}: {e}")
    rows = [j for j in jobs.values() if all(m in j for m in methods)]
    if not rows:
        sys.exit(f"{path}: no job of queue {queue} has a prediction from {','.join(methods)}")
    t0 = rows[0]["submit"]
    days = [(j["submit"] - t0) / 86400 for j in rows]
    top = max(max(j["wait"], *(j[m] for m in methods)) for j in rows)
    decades = max(1, math.ceil(math.log10(1 + top)))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    span = max(days[-1], 1e-9)

    def x(d):
        return LEFT + pw * d / span

    def y(v):
        return TOP + ph * (1 - math.log10(1 + v) / decades)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>']
    for k in range(decades + 1):
        v = 10 ** k if k else 0
        yy = y(v)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{human(v)}</text>')
    step = max(1, round(span / 8))
    d = 0
    while d <= span:
        out.append(f'<text x="{x(d):.1f}" y="{H - BOTTOM + 18}" text-anchor="middle">{d}</text>')
        d += step
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 12}" text-anchor="middle">days since the first scored job</text>')
    out.append(f'<text x="16" y="{TOP + ph / 2}" transform="rotate(-90 16 {TOP + ph / 2})" '
               'text-anchor="middle">seconds (log of 1 + value)</text>')
    for d, j in zip(days, rows):
        out.append(f'<circle cx="{x(d):.1f}" cy="{y(j["wait"]):.1f}" r="1.6" fill="#888" fill-opacity="0.6"/>')
    for i, m in enumerate(methods):
        pts = " ".join(f"{x(d):.1f},{y(j[m]):.1f}" for d, j in zip(days, rows))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="1.3"/>')
    legend = [("wait", "#888")] + [(f"{m} bound", COLORS[i % len(COLORS)]) for i, m in enumerate(methods)]
    for i, (name, color) in enumerate(legend):
        lx = LEFT + 10 + i * 150
        out.append(f'<rect x="{lx}" y="{TOP + 6}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{lx + 18}" y="{TOP + 16}">{name}</text>')
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
