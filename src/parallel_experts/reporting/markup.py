"""Every string that reaches a report's HTML passes here: plain text is escaped, a file path becomes a relative
URL, Markdown is rendered and then sanitised, HTML is sanitised, all against one allow-list. The small Markdown
pieces every page shares (the scale banner, a list of summary lines, a table's check mark) are built here too, so
that the config strings in them pass the one escaping function, `text`.

Strings from a config (its `description`, `plan.<family>.device`), a results file or a file name end up on
pages that a reader opens in a browser; a `<script>`, an `on…` attribute or a `javascript:` link among them
would run there. The sanitiser is nh3 (ammonia), which parses the HTML as a browser does, so entities and case
tricks (`&#106;avascript:`, `JaVaScRiPt:`) are decoded before a URL's scheme is judged; anything not on the
allow-list below is dropped, a `<script>` with its content.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from collections.abc import Iterable
from pathlib import PurePath

import nh3
from nbconvert.filters.markdown_mistune import markdown2html_mistune

# What Markdown renders to (headings, paragraphs, emphasis, code, lists, quotes, tables, links, images) and what
# pandas writes for a styled table (its cells' ids and classes, and a <style> element checked by SAFE_CSS).
TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "b", "i", "del", "sub", "sup",
        "code", "pre", "blockquote", "ul", "ol", "li", "dl", "dt", "dd", "a", "img", "span", "div",
        "table", "caption", "colgroup", "col", "thead", "tbody", "tfoot", "tr", "th", "td", "style"}
ATTRIBUTES = {"*": {"id", "class", "title"}, "a": {"href"}, "img": {"src", "alt", "width", "height"},
              "th": {"colspan", "rowspan", "scope"}, "td": {"colspan", "rowspan"}, "col": {"span"},
              "ol": {"start"}, "style": {"type"}}
# Links and images may use these schemes, or be relative (nh3's default); javascript:, data:, vbscript:, file: are
# dropped. The page itself loads nothing remote (render.offline): an http(s) image fails the render.
URL_SCHEMES = {"http", "https", "mailto"}
# A <style> element survives only as plain rules (selectors and `property: value;`): no url(), no @import, no
# function, no escape, no quote, so nothing on the page is fetched or hidden through a string that reached CSS.
STYLE = re.compile(r"(<style\b[^>]*>)(.*?)(</style>)", re.DOTALL | re.IGNORECASE)
SAFE_CSS = re.compile(r"[\w\s#.,:;{}>%!*+~-]*")


def text(value) -> str:
    """Plain text (a config value, a name read from a file) as HTML text: shown as typed, never parsed."""
    return html.escape(str(value))


def scale_banner(scale: str, description: str) -> str:
    """The first line of every report: the config's scale and what it reduced (Markdown). Markdown passes HTML
    through, so a description holding `<script>` or `<img onerror=…>` is escaped, else it would run on every page."""
    return f"**Scale: {text(scale)}.** {text(description)}"


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
    renders a notebook's Markdown."""
    return sanitise(markdown2html_mistune(str(source)))


def sanitise(fragment: str) -> str:
    """An HTML fragment with everything off the allow-list removed: tags, attributes, URL schemes and CSS."""
    cleaned = nh3.clean(str(fragment), tags=TAGS, clean_content_tags={"script"}, attributes=ATTRIBUTES,
                        url_schemes=URL_SCHEMES, strip_comments=True, link_rel="noopener noreferrer")
    return STYLE.sub(lambda m: m.group(0) if SAFE_CSS.fullmatch(m.group(2)) else "", cleaned)
