#!/usr/bin/env python3
"""Grouped bar chart (SVG) from a markdown table on stdin.

usage: svg-bars.py GROUP_COL BAR_COL VALUE_COL TITLE > chart.svg
Columns are 0-based indices into the table's cells. Standard library only.
"""
import sys

group_col, bar_col, value_col = (int(a) for a in sys.argv[1:4])
title = sys.argv[4]
rows = []
for line in sys.stdin:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) <= value_col or set(cells[0]) <= set("-: "):
        continue
    try:
        rows.append((cells[group_col], cells[bar_col], float(cells[value_col])))
    except ValueError:
        continue  # the header
groups = list(dict.fromkeys(r[0] for r in rows))
bars = list(dict.fromkeys(r[1] for r in rows))
val = {(g, b): v for g, b, v in rows}
colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"]
W, H, left, top, bottom = 760, 380, 60, 40, 70
gw = (W - left - 20) / len(groups)
bw = gw * 0.8 / len(bars)
vmax = max(val.values()) * 1.1
y = lambda v: top + (H - top - bottom) * (1 - v / vmax)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>',
       f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
       f'<line x1="{left}" y1="{y(0)}" x2="{W-20}" y2="{y(0)}" stroke="black"/>']
for k in range(6):
    v = vmax / 1.1 * k / 5
    out.append(f'<text x="{left-5}" y="{y(v)+4}" text-anchor="end">{v:.0f}</text>')
    out.append(f'<line x1="{left}" y1="{y(v)}" x2="{W-20}" y2="{y(v)}" stroke="#ddd"/>')
for gi, g in enumerate(groups):
    x0 = left + gi * gw + gw * 0.1
    for bi, b in enumerate(bars):
        v = val.get((g, b))
        if v is None:
            continue
        x = x0 + bi * bw
        out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bw-2:.1f}" height="{y(0)-y(v):.1f}" fill="{colors[bi % len(colors)]}"><title>{g} {b}: {v}</title></rect>')
    out.append(f'<text x="{left + gi*gw + gw/2:.1f}" y="{y(0)+16}" text-anchor="middle">{g}</text>')
for bi, b in enumerate(bars):
    x = left + bi * 135
    out.append(f'<rect x="{x}" y="{H-30}" width="12" height="12" fill="{colors[bi % len(colors)]}"/>')
    out.append(f'<text x="{x+16}" y="{H-20}">{b}</text>')
out.append("</svg>")
print("\n".join(out))
