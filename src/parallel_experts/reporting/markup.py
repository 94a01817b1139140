"""Every string that reaches a report's HTML passes here, by construction rather than by a list of call sites:
- every Markdown output of a notebook is rendered with its HTML escaped (`markdown`): a tag in it, whoever wrote
  it, shows as typed, so a config string, a results file's string or a file name put into a summary line is text;
- every table is styled by `table`, which escapes each cell, column name and index label before any formatter
  sees it (pandas' Styler does not escape by default, nor after a `.format` call);
- the index page's cells pass `text` and its links `url`;
- and all HTML is then sanitised against one allow-list (`sanitise`).

Strings from a config (its `description`, a plan's `device`, a corpus's file names or dataset name), a results
file or a file name end up on pages that a reader opens in a browser; a `<script>`, an `on…` attribute or a
`javascript:` link among them would run there, and a `<style>` could hide the page. The sanitiser is nh3
(ammonia), which parses the HTML as a browser does, so entities and case tricks (`&#106;avascript:`,
`JaVaScRiPt:`) are decoded before a URL's scheme is judged; anything not on the allow-list below is dropped, a
`<script>` with its content.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import PurePath

import nh3
import pandas as pd
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from pandas.io.formats.style import Styler

# What Markdown renders to (headings, paragraphs, emphasis, code, lists, quotes, tables, links) and what pandas
# writes for a styled table (its cells' ids and classes, and a <style> element checked by SAFE_CSS). No image: a
# page's figures are PNG outputs, embedded by the template, so an <img> or a Markdown image is never ours.
TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "b", "i", "del", "sub", "sup",
        "code", "pre", "blockquote", "ul", "ol", "li", "dl", "dt", "dd", "a", "span", "div",
        "table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "th", "td", "style"}
ATTRIBUTES = {"*": {"id", "class", "title"}, "a": {"href"}, "th": {"colspan", "rowspan", "scope"},
              "td": {"colspan", "rowspan"}, "col": {"span"}, "ol": {"start"}, "style": {"type"}}
# Links may use these schemes, or be relative (nh3's default); javascript:, data:, vbscript:, file: are dropped.
URL_SCHEMES = {"http", "https", "mailto"}
# A <style> element survives only as plain rules (selectors and `property: value;`): no url(), no @import, no
# function, no escape, no quote, so nothing on the page is fetched or hidden through a string that reached CSS.
STYLE = re.compile(r"(<style\b[^>]*>)(.*?)(</style>)", re.DOTALL | re.IGNORECASE)
SAFE_CSS = re.compile(r"[\w\s#.,:;{}>%!*+~-]*")


def text(value) -> str:
    """Plain text (a config value, a name read from a file) as HTML text: shown as typed, never parsed. Not for
    Markdown, which `markdown` escapes itself (this would show `&lt;`)."""
    return html.escape(str(value))


def table(frame: pd.DataFrame, formats: Mapping | None = None, *, index: bool = False, **options) -> Styler:
    """A table as every page shows it: each cell, column name and index label shown as typed (escaped before a
    formatter sees it, so a formatter such as a link's may return HTML); `formats` maps a column to its format
    string or function, `options` (precision, na_rep, thousands) apply to the other cells."""
    styled = frame.style if index else frame.style.hide(axis="index")
    return (styled.format(formats, escape="html", **options)
            .format_index(escape="html", axis="index").format_index(escape="html", axis="columns"))


def scale_banner(scale: str, description: str) -> str:
    """The first line of every report: the config's scale and what it reduced (Markdown: the description's
    emphasis, code and links render, its HTML shows as typed)."""
    return f"**Scale: {scale}.** {description}"


def bullets(lines: Iterable[str]) -> str:
    """A Markdown list, one item per line."""
    return "\n".join(f"- {line}" for line in lines)


def check_mark(flag: bool) -> str:
    """How a table shows a true flag (✓) and a false one (blank)."""
    return "✓" if flag else ""


def url(path: str | PurePath) -> str:
    """A relative file path as the value of an href: percent-encoded, so that no file name reads as a scheme
    (`javascript:x.html` becomes `javascript%3Ax.html`), then escaped for the attribute."""
    return html.escape(urllib.parse.quote(PurePath(path).as_posix()))


def markdown(source: str) -> str:
    """Markdown (a config's description, a report's summary lines) as sanitised HTML, rendered as nbconvert
    renders a notebook's Markdown but with every HTML tag in it escaped: our Markdown never writes HTML, so any
    tag is a string from elsewhere, shown as typed."""
    return sanitise(MarkdownWithMath(renderer=IPythonRenderer(escape=True)).render(str(source)))


def sanitise(fragment: str) -> str:
    """An HTML fragment with everything off the allow-list removed: tags, attributes, URL schemes and CSS."""
    cleaned = nh3.clean(str(fragment), tags=TAGS, clean_content_tags={"script"}, attributes=ATTRIBUTES,
                        url_schemes=URL_SCHEMES, strip_comments=True, link_rel="noopener noreferrer")
    return STYLE.sub(lambda m: m.group(0) if SAFE_CSS.fullmatch(m.group(2)) else "", cleaned)
