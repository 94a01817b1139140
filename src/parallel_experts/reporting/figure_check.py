"""What a reader would trip over in a figure, found by drawing it: text that shows markup instead of rendering it,
text drawn over text, an axis with tick labels and no label, a legend entry with no visible mark or named twice,
and legend text under 8 points (issue 43). `defects` draws a figure once and lists what it found, in words that
name the text or the entry.

Only what is drawn counts: a tick label outside the view, an invisible artist or an empty string is nothing a
reader sees. `watch` checks every figure a report notebook shows, where `render` asks for it (ENV).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib.pyplot as plt
from IPython import get_ipython
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

ENV = "PARALLEL_EXPERTS_FIGURE_DEFECTS"  # a file that each figure a page shows appends its defects to (JSON lines)

# Mathtext a reader sees as typed: pages draw no mathtext (page.begin), so a TeX command or a braced super- or
# subscript in a drawn string is markup shown as text ($\mathdefault{10^{1}}$ from a log axis's default labels).
MARKUP = re.compile(r"\\[A-Za-z]+|[\^_]\{")
SMALLEST_LEGEND_POINTS = 8.0
OVERLAP_PIXELS = 0.5  # two texts whose drawn boxes share more than this in both directions overlap
_NO_LINE = {"None", "none", "", " "}


@contextmanager
def _recording(drawn: list[tuple[Text, Bbox]]) -> Iterator[None]:
    """Every text drawn inside the block, with its box on the canvas."""
    draw = Text.draw

    def recorded(text: Text, renderer) -> None:
        draw(text, renderer)
        if text.get_visible() and text.get_text().strip():
            drawn.append((text, text.get_window_extent(renderer)))

    Text.draw = recorded
    try:
        yield
    finally:
        Text.draw = draw


def drawn_texts(fig: plt.Figure) -> list[tuple[Text, Bbox]]:
    """The texts a reader sees in `fig`, each with its drawn box, in drawing order."""
    drawn: list[tuple[Text, Bbox]] = []
    with _recording(drawn):
        fig.canvas.draw()
    return drawn


def defects(fig: plt.Figure) -> list[str]:
    """Every defect of `fig` a reader would see, in words; none for a sound figure."""
    drawn = drawn_texts(fig)
    found = [f"markup shown as text: {text.get_text()!r}" for text, _ in drawn if MARKUP.search(text.get_text())]
    found += _overlaps(drawn)
    found += _unlabelled_axes(fig, {id(text) for text, _ in drawn})
    for legend in _legends(fig):
        found += _legend_defects(legend)
    return found


def _overlaps(drawn: list[tuple[Text, Bbox]]) -> list[str]:
    found = []
    for (a, box_a), (b, box_b) in itertools.combinations(drawn, 2):
        width = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        height = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if width > OVERLAP_PIXELS and height > OVERLAP_PIXELS:
            found.append(f"text on text: {a.get_text()!r} and {b.get_text()!r}")
    return found


def _unlabelled_axes(fig: plt.Figure, drawn: set[int]) -> list[str]:
    """An axis whose tick labels are drawn needs a label, on it or on an axes it shares that axis with."""
    found = []
    for ax in fig.axes:
        for name, axis, shared in (("x", ax.xaxis, ax.get_shared_x_axes()), ("y", ax.yaxis, ax.get_shared_y_axes())):
            ticks = axis.get_ticklabels() + axis.get_ticklabels(minor=True)
            if not any(id(label) in drawn for label in ticks):
                continue
            if not any(getattr(other, f"get_{name}label")().strip() for other in shared.get_siblings(ax)):
                title = ax.get_title() or ax.get_label() or "an axes"
                found.append(f"{name} axis without a label: {title!r}")
    return found


def _legends(fig: plt.Figure) -> list[Legend]:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def _legend_defects(legend: Legend) -> list[str]:
    found = []
    labels = [text.get_text() for text in legend.texts]
    found += [f"legend entry named twice: {label!r}" for label in sorted({x for x in labels if labels.count(x) > 1})]
    for handle, text in zip(legend.legend_handles, legend.texts):
        if not _visible_mark(handle):
            found.append(f"legend entry with no visible mark: {text.get_text()!r}")
        if text.get_fontsize() < SMALLEST_LEGEND_POINTS:
            found.append(f"legend text under {SMALLEST_LEGEND_POINTS:g} points ({text.get_fontsize():.1f}): "
                         f"{text.get_text()!r}")
    return found


def _visible_mark(handle) -> bool:
    """Whether a legend handle draws anything: a line or a marker, a patch with a visible face or edge."""
    if handle is None or not handle.get_visible():
        return False
    if isinstance(handle, Line2D):
        has_line = handle.get_linestyle() not in _NO_LINE and handle.get_linewidth() > 0
        return has_line or handle.get_marker() not in (*_NO_LINE, None)
    if isinstance(handle, Patch):
        return handle.get_facecolor()[3] > 0 or (handle.get_edgecolor()[3] > 0 and handle.get_linewidth() > 0)
    return True


def watch() -> None:
    """In a report notebook's kernel, where ENV names a file: check each figure as the page shows it, and append
    its defects there (one JSON object per figure: its number on the page and its defects)."""
    path, shell = os.environ.get(ENV), get_ipython()  # a shell only in a kernel
    if not path or shell is None:
        return
    plt.close(plt.figure())  # the inline backend registers its printer of figures with the first figure made
    formatter = shell.display_formatter.formatters["image/png"]
    try:
        shown = formatter.lookup_by_type(plt.Figure)
    except KeyError:  # no inline backend: figures are not shown as images
        return
    count = itertools.count(1)

    def checked(fig: plt.Figure):
        found = {"figure": next(count), "title": fig.get_suptitle() or "", "defects": defects(fig)}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(found) + "\n")
        return shown(fig)

    formatter.for_type(plt.Figure, checked)


def read(path: str | os.PathLike) -> list[dict]:
    """What `watch` wrote: per figure shown that has a defect, its number, title and defects."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as lines:
        return [found for found in map(json.loads, lines) if found["defects"]]
