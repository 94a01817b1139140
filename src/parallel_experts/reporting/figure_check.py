"""What a reader would trip over in a figure, found by drawing it (issue 43): text that shows markup instead of
rendering it, text drawn over text or tick labels run together, an axis with tick labels and no label, a legend
entry with no visible mark, named twice, in text under 8 points or keying a mark the plot does not draw, a legend
over the data, a band or error bars that nothing names, marks in a colour no key shows, and a plot whose every line
is flat with no word in it. `defects` draws a figure once and lists what it found, in words that name the text, the
entry or the panel.

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
import numpy as np
from IPython import get_ipython
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

ENV = "PARALLEL_EXPERTS_FIGURE_DEFECTS"  # a file that each figure a page shows appends its defects to (JSON lines)

# Mathtext a reader sees as typed: pages draw no mathtext (page.begin), so a TeX command or a braced super- or
# subscript in a drawn string is markup shown as text ($\mathdefault{10^{1}}$ from a log axis's default labels).
MARKUP = re.compile(r"\\[A-Za-z]+|[\^_]\{")
SMALLEST_LEGEND_POINTS = 8.0
OVERLAP_PIXELS = 0.5  # two texts whose drawn boxes share more than this in both directions overlap
TICK_GAP_EM = 0.25  # neighbouring tick labels closer than this (in their font's size) read as one: "13" "16" → 1316
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
    found += _crowded_ticks(fig, {id(text): box for text, box in drawn})
    found += _unlabelled_axes(fig, {id(text) for text, _ in drawn})
    for legend in _legends(fig):
        found += _legend_defects(legend)
    found += _legends_over_data(fig)
    found += _unbacked_keys(fig)
    found += _unnamed_marks(fig)
    found += _unkeyed_colours(fig)
    found += _flat_without_words(fig)
    return found


def _overlaps(drawn: list[tuple[Text, Bbox]]) -> list[str]:
    found = []
    for (a, box_a), (b, box_b) in itertools.combinations(drawn, 2):
        width = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
        height = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
        if width > OVERLAP_PIXELS and height > OVERLAP_PIXELS:
            found.append(f"text on text: {a.get_text()!r} and {b.get_text()!r}")
    return found


def _crowded_ticks(fig: plt.Figure, drawn: dict[int, Bbox]) -> list[str]:
    """Neighbouring tick labels of one axis with less than TICK_GAP_EM of their font between them."""
    found = []
    for ax in fig.axes:
        for axis, lo, hi in ((ax.xaxis, "x0", "x1"), (ax.yaxis, "y0", "y1")):
            shown = sorted(((label, drawn[id(label)]) for label in axis.get_ticklabels() if id(label) in drawn),
                           key=lambda pair: getattr(pair[1], lo))
            for (a, box_a), (b, box_b) in itertools.pairwise(shown):
                em = a.get_fontsize() * fig.dpi / 72
                if -OVERLAP_PIXELS <= getattr(box_b, lo) - getattr(box_a, hi) < TICK_GAP_EM * em:  # more: on text
                    found.append(f"tick labels run together: {a.get_text()!r} and {b.get_text()!r}")
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
    """Whether a legend handle draws anything: a line or a marker, a patch with a visible face, edge or hatch."""
    if handle is None or not handle.get_visible():
        return False
    if isinstance(handle, Line2D):
        has_line = handle.get_linestyle() not in _NO_LINE and handle.get_linewidth() > 0
        return has_line or handle.get_marker() not in (*_NO_LINE, None)
    if isinstance(handle, Patch):
        edge = handle.get_edgecolor()[3] > 0
        return handle.get_facecolor()[3] > 0 or (edge and (handle.get_linewidth() > 0 or bool(handle.get_hatch())))
    return True


def _panel(ax: plt.Axes, fig: plt.Figure) -> str:
    """A panel as a defect names it: its title, else the figure's."""
    return ax.get_title() or fig.get_suptitle() or "a panel"


def _legends_over_data(fig: plt.Figure) -> list[str]:
    """A legend inside a panel whose box covers a point the panel plots (a line's vertex, a scatter's mark)."""
    found = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent()
        points = [line.get_transform().transform(line.get_xydata()) for line in ax.lines if _drawn(line)]
        points += [c.get_offset_transform().transform(c.get_offsets()) for c in ax.collections
                   if isinstance(c, PathCollection) and c.get_visible() and len(c.get_offsets())]
        xy = np.concatenate([np.asarray(p, float).reshape(-1, 2) for p in points]) if points else np.empty((0, 2))
        if ((xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)).any():
            found.append(f"a legend over the data it keys: {_panel(ax, fig)!r}")
    return found


def _drawn(line: Line2D) -> bool:
    return line.get_visible() and np.isfinite(np.asarray(line.get_ydata(), float)).any()


def _is_data(line: Line2D, ax: plt.Axes) -> bool:
    """A line drawn in data coordinates (not a reference line across the axes, axhline's) with a finite point."""
    return _drawn(line) and line.get_transform() == ax.transData


def _marker_path(marker) -> np.ndarray:
    style = MarkerStyle(marker)
    return style.get_path().transformed(style.get_transform()).vertices


def _drawn_marks(fig: plt.Figure) -> tuple[set, set, list[np.ndarray]]:
    """What the plots of `fig` draw: the markers and line styles of their data lines, and their scatters' marks."""
    markers, styles, scattered = set(), set(), []
    for ax in fig.axes:
        for line in filter(_drawn, ax.lines):
            markers.add(line.get_marker())
            styles.add(line.get_linestyle())  # a reference line too (axhline): a key may name it
        scattered += [c.get_paths()[0].vertices for c in ax.collections
                      if isinstance(c, PathCollection) and c.get_visible() and len(c.get_offsets()) and c.get_paths()]
    return markers, styles, scattered


def _scattered(marker, scattered: list[np.ndarray]) -> bool:
    """Whether a scatter drew `marker` (a scatter keeps its marker as a path)."""
    path = _marker_path(marker)
    return any(drawn.shape == path.shape and np.allclose(drawn, path) for drawn in scattered)


def _unbacked_keys(fig: plt.Figure) -> list[str]:
    """Legend entries that key a marker or a line style no plot of the figure draws (a family with no data, "best
    per depth" keyed solid and drawn dashed). Colour is not compared: keys of size or style are drawn grey."""
    markers, styles, scattered = _drawn_marks(fig)
    found = []
    for legend in _legends(fig):
        for handle, text in zip(legend.legend_handles, legend.texts):
            if not isinstance(handle, Line2D) or not _visible_mark(handle):
                continue
            marker, style = handle.get_marker(), handle.get_linestyle()
            if marker not in (*_NO_LINE, None) and marker not in markers and not _scattered(marker, scattered):
                found.append(f"legend entry keys a marker no plot draws ({marker!r}): {text.get_text()!r}")
            if style not in _NO_LINE and handle.get_linewidth() > 0 and style not in styles:
                found.append(f"legend entry keys a line style no plot draws ({style!r}): {text.get_text()!r}")
    return found


def _unnamed_marks(fig: plt.Figure) -> list[str]:
    """A shaded band or span, or error bars, that no legend entry keys (nor, for error bars, an axis label with ±);
    and error bars keyed where none is drawn (one seed: bars of no length)."""
    bar_labels = {container.get_label() for ax in fig.axes for container in ax.containers
                  if isinstance(container, BarContainer)}
    keyed_band = keyed_error = False
    for legend in _legends(fig):
        for handle, text in zip(legend.legend_handles, legend.texts):
            keyed_band |= isinstance(handle, Patch | PolyCollection) and text.get_text() not in bar_labels
        keyed_error |= any(isinstance(artist, LineCollection) for artist in legend.findobj())
    found, drawn_error = [], False
    for ax in fig.axes:
        where = _panel(ax, fig)
        bands = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_visible()
                 and any(len(path.vertices) for path in c.get_paths())]  # seaborn's band of one seed is empty
        bands += [p for p in ax.patches if p.get_visible() and p.get_data_transform() != ax.transData]  # axhspan's
        if bands and not keyed_band:
            found.append(f"a shaded band that no legend entry names: {where!r}")
        collections = [lines for c in ax.containers if isinstance(c, ErrorbarContainer) for lines in c.lines[2]]
        drawn = any(np.ptp(segment, axis=0).max() > 0 for lines in collections for segment in lines.get_segments())
        drawn_error |= drawn
        named = keyed_error or "±" in ax.get_ylabel() + ax.get_xlabel()
        if drawn and not named:
            found.append(f"error bars that no legend entry or axis label (±) names: {where!r}")
    if keyed_error and not drawn_error:
        found.append("error bars keyed in a legend where none is drawn (no bar has a length)")
    return found


def _colour(rgba) -> tuple[float, ...] | None:
    """A mark's colour as a reader sees it, to 2 decimals; None where it shows none (transparent, or white: an open
    mark, whose edge then carries its colour)."""
    rgba = np.asarray(to_rgba(rgba), float)
    if rgba[3] == 0 or (rgba[:3] > 0.99).all():
        return None
    return tuple(np.round(rgba[:3], 2))


def _scatter_colours(collection: PathCollection) -> set:
    """The colours of a scatter's marks: each face, or its edge where the face is open."""
    faces, edges = collection.get_facecolors(), collection.get_edgecolors()
    found = set()
    for i in range(len(collection.get_offsets())):
        face = _colour(faces[i % len(faces)]) if len(faces) else None
        edge = _colour(edges[i % len(edges)]) if len(edges) else None
        found.add(face if face is not None else edge)
    return found - {None}


def _unkeyed_colours(fig: plt.Figure) -> list[str]:
    """Scatter marks whose colour no legend entry's mark shows, in a figure whose legends key marks at all (grey
    points beside a black default keyed "ours"). A figure that keys no mark says what its colours are otherwise: an
    axis of verdicts, a title."""
    keyed = set()
    for legend in _legends(fig):
        for handle in legend.legend_handles:
            if isinstance(handle, Line2D) and handle.get_marker() not in (*_NO_LINE, None):
                keyed |= {_colour(handle.get_markerfacecolor()), _colour(handle.get_markeredgecolor())}
            elif isinstance(handle, PathCollection):
                keyed |= _scatter_colours(handle)
    keyed.discard(None)
    if not keyed:
        return []
    found = []
    for ax in fig.axes:
        drawn = set().union(*(_scatter_colours(c) for c in ax.collections if isinstance(c, PathCollection)
                              and c.get_visible() and len(c.get_offsets())))
        if drawn - keyed:
            found.append(f"marks in a colour no legend entry shows: {_panel(ax, fig)!r}")
    return found


def _flat_without_words(fig: plt.Figure) -> list[str]:
    """A panel whose every data line lies flat at one value (all recalls zero) reads as a broken plot unless words
    in the panel say so."""
    found = []
    for ax in fig.axes:
        values = [np.asarray(line.get_ydata(), float) for line in ax.lines
                  if _is_data(line, ax) and len(line.get_xdata()) > 1]
        values = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.array([])
        if len(values) and np.ptp(values) == 0 and not any(t.get_visible() and t.get_text() for t in ax.texts):
            found.append(f"every line flat at {values[0]:g} and no word in the panel: {_panel(ax, fig)!r}")
    return found


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
