#!/usr/bin/python3
"""A Markdown table of numbers as an SVG line chart, with nothing but the standard library.

    scripts/length_generalisation.sh > table.md
    scripts/plot_table.py table.md docs/length_generalisation.svg --y "bits/char" [--x "T (context length)"]

The header row names the x values ("T = 128", ...: the number is taken from each header cell);
each later row is one line, labelled by its first cell; "-" cells are gaps. The x axis is
logarithmic (base 2) when every x is a power of two.
"""
import argparse
import math
import re

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]


def read_table(path):
    rows = [line.strip().strip("|").split("|") for line in open(path, encoding="utf-8") if line.startswith("|")]
    if not rows:
        return [], []
    header, body = rows[0], [r for r in rows[1:] if not set("".join(r)) <= set("-: ")]
    xs = [float(re.findall(r"[-0-9.]+", cell)[-1]) for cell in header[1:]]
    lines = []
    for r in body:
        ys = [float(c) if re.fullmatch(r"\s*[-0-9.]+\s*", c) and c.strip() != "-" else None for c in r[1:]]
        lines.append((r[0].strip(), ys))
    return xs, lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("table", help="a Markdown file holding one table: its lines that start with '|'")
    p.add_argument("svg", help="the SVG file to write")
    p.add_argument("--y", default="", help="y axis label")
    p.add_argument("--x", default="T (context length)", help="x axis label")
    a = p.parse_args()
    xs, lines = read_table(a.table)
    if len(xs) < 2 or not lines:
        p.error(f"{a.table}: expected a table with a header row of at least two x values and a row of numbers")
    log2 = all(x > 0 and math.log2(x).is_integer() for x in xs)
    fx = (lambda x: math.log2(x)) if log2 else (lambda x: x)
    ys = [y for _, v in lines for y in v if y is not None]
    y_lo, y_hi = math.floor(min(ys) * 2) / 2, math.ceil(max(ys) * 2) / 2
    W, H, left, right, top, bottom = 760, 420, 60, 250, 20, 50
    def px(x):
        return left + (fx(x) - fx(xs[0])) / (fx(xs[-1]) - fx(xs[0])) * (W - left - right)
    def py(y):
        return top + (y_hi - y) / (y_hi - y_lo) * (H - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    for x in xs:  # x grid and ticks
        out.append(f'<line x1="{px(x):.1f}" y1="{top}" x2="{px(x):.1f}" y2="{H - bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{px(x):.1f}" y="{H - bottom + 16}" text-anchor="middle">{x:g}</text>')
    y = y_lo
    while y <= y_hi + 1e-9:  # y grid every 0.5
        out.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{W - right}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y += 0.5
    out.append(f'<text x="{(left + W - right) / 2}" y="{H - 10}" text-anchor="middle">{a.x}</text>')
    out.append(f'<text x="14" y="{(top + H - bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(top + H - bottom) / 2})">{a.y}</text>')
    for n, (label, v) in enumerate(lines):
        colour = COLOURS[n % len(COLOURS)]
        points = [(px(x), py(y)) for x, y in zip(xs, v) if y is not None]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        ly = top + 14 + 18 * n
        out.append(f'<line x1="{W - right + 12}" y1="{ly - 4}" x2="{W - right + 32}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{W - right + 38}" y="{ly}">{label.replace("&", "&amp;").replace("<", "&lt;")}</text>')
    out.append("</svg>")
    with open(a.svg, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
