"""Numbers and tables as plain text, for what the CLI prints."""

from __future__ import annotations


def fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:,.0f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(row: list[str]) -> str:  # first column left-aligned, numbers right-aligned
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])
