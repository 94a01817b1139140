"""Rendering reports: papermill runs a notebook with parameters, nbconvert turns it into code-free HTML.

Every report gets a sidecar JSON (what produced it, when) from which `write_index` builds reports/index.html.
Pages must show everything offline: figures are embedded images, tables are HTML, and the scripts of nbconvert's
template (require.js, MathJax, Mermaid) are removed because nothing on our pages needs them. What a notebook
displays reaches the page only through `markup` (`safe_outputs`): the strings a config or a results file put in
it are data, never code.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from unittest import mock

import nbformat
import papermill
from nbconvert import HTMLExporter
from papermill.exceptions import PapermillExecutionError

from parallel_experts.config.errors import PipelineError, reason
from parallel_experts.core import atomic, records
from parallel_experts.reporting import figure_check, jobs, markup
from parallel_experts.study import Study
from parallel_experts.targets import catalogue

SCRIPT = re.compile(r"<script\b.*?</script>\s*", re.DOTALL | re.IGNORECASE)
MATHJAX_CONFIG = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->\s*", re.DOTALL)
# Where a page would load something from the network: any src, or the href of anything but a link (<a>), which
# only navigates.
REMOTE = re.compile(r"""<(?!a\s)[a-z][^>]*?\b(?:src|href)=["'](https?://[^"']+)""", re.IGNORECASE)
# The outputs a page may show: text, raster images (embedded as data: URIs by the template), and HTML or Markdown
# after `markup`; the others (JavaScript, SVG, widgets, LaTeX) are dropped, their text/plain form stays.
SHOWN = {"text/plain", "image/png", "image/jpeg"}
# What the index reads of each report's sidecar JSON (written by `render`).
META = {"html": str, "title": str, "scale": str, "config_files": list, "config_digest": str, "rendered": str}


def render(
    notebook: str | Path,
    html_path: str | Path,
    executed_path: str | Path,
    meta_path: str | Path,
    parameters: Mapping,
    provenance: Mapping,
) -> None:
    """Execute `notebook` with `parameters`, write the executed copy, the HTML page and its sidecar JSON."""
    for path in (html_path, executed_path, meta_path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # Executed into a temporary file: a notebook that fails leaves the last good executed copy as it was.
    with atomic.atomic_path(executed_path) as executing, tempfile.TemporaryDirectory() as checks:
        try:
            figures = Path(checks) / "figures.jsonl"  # where the kernel's figure check writes (figure_check.watch)
            with kernel_log(), mock.patch.dict(os.environ, {figure_check.ENV: str(figures)}):
                # papermill formats both paths with the parameters: braces in a folder's name are literal
                papermill.execute_notebook(
                    _literal(notebook), _literal(executing), parameters=dict(parameters), kernel_name="python3",
                    progress_bar=False, cwd=str(Path.cwd()), log_output=False,
                )
        except PapermillExecutionError as error:
            raise PipelineError(f"{notebook}: raised {error.ename}: {reason(Exception(error.evalue))} (cell "
                                f"[{error.exec_count}] of the executed notebook, its parameters first)") from None
        executed = safe_outputs(nbformat.read(executing, as_version=4))
        figure_defects = figure_check.read(figures)
    for found in figure_defects:  # the page is written all the same: the defects are the reader's to see, and ours
        print(f"{html_path}: figure {found['figure']} {found['title']!r}: {'; '.join(found['defects'])}",
              file=sys.stderr)
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(executed)
    atomic.write_text(html_path, offline(body))
    meta = {"notebook": str(notebook), "html": str(html_path), "title": title_of(executed),
            "rendered": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "figure_defects": figure_defects, **provenance}
    atomic.write_text(meta_path, json.dumps(meta, indent=2))


def _literal(path: str | Path) -> str:
    return str(path).replace("{", "{{").replace("}", "}}")


@contextlib.contextmanager
def kernel_log() -> Iterator[None]:
    """Hold what the kernel process writes to stderr (its start-up warnings, its shutdown): passed on if the
    notebook ran, dropped if it failed, whose error is then the one line that the caller prints."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)  # the kernel is a child process: only the descriptor reaches it
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        held.seek(0)
        sys.stderr.write(held.read().decode(errors="replace"))


def safe_outputs(notebook):
    """The notebook with every output as the page may show it: Markdown rendered and HTML sanitised by
    `markup`, any other kind of output but text and raster images dropped."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if "data" not in output:
                continue  # a stream or an error: the template escapes its text
            data = output["data"]
            shown = {mime: data[mime] for mime in SHOWN if mime in data}
            if "text/html" in data:
                shown["text/html"] = markup.sanitise(data["text/html"])
            elif "text/markdown" in data:
                shown["text/html"] = markup.markdown(data["text/markdown"])
            output["data"] = shown
    return notebook


def offline(page: str) -> str:
    """Drop the template's scripts; fail loudly if anything else on the page still loads from the network."""
    page = MATHJAX_CONFIG.sub("", SCRIPT.sub("", page))
    remote = REMOTE.findall(page)
    if remote:
        raise PipelineError(f"report still loads remote resources: {remote[:3]}")
    return page


def title_of(notebook) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return "untitled"


def write_index(meta_paths: Sequence[str | Path], index_path: str | Path, study: Study) -> None:
    """reports/index.html, by paper item (catalogue.index_items): its target, its report with the scale, config
    and date that rendered it, or why it is missing (the config lacks what the item needs, or it did not render)."""
    index_path = Path(index_path)
    metas = {Path(m["html"]).stem: m for m in (records.read_json(p, META, "a report's sidecar") for p in meta_paths)}
    rows = []
    for item, found in catalogue.index_items(study):
        cells = [markup.text(item.paper), f"<code>{markup.text(item.target)}</code>" if item.target else ""]
        if not found:
            rows.append(_row(cells, f'<td colspan="3" class="missing">missing: it needs '
                                    f"{markup.text(item.needs)} in the config</td>"))
        for report in found:
            meta = metas.get(report.name)
            if meta is None:
                rows.append(_row(cells, f'<td colspan="3" class="missing">missing: reports/{markup.text(report.name)}'
                                        ".html was not rendered</td>"))
                continue
            link = os.path.relpath(meta["html"], index_path.parent)
            rows.append(_row(cells, f"<td><a href=\"{markup.url(link)}\">{markup.text(meta['title'])}</a></td>"
                                    f"<td>{markup.text(meta['scale'])}</td>"
                                    f"<td><code>{markup.text(' '.join(meta['config_files']))}</code> "
                                    f"({markup.text(meta['config_digest'])}), {markup.text(meta['rendered'])}</td>"))
    atomic.write_text(index_path, INDEX_TEMPLATE.format(
        rows="\n".join(rows),
        banner=markup.markdown(markup.scale_banner(study.scale, study.description)),
        built=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    ))


def _row(item_cells: list[str], report_cells: str) -> str:
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in item_cells) + report_cells + "</tr>"


INDEX_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Temporal Recurrence Favors Fewer Layers: reproduction reports</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 70em; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ text-align: left; padding: 0.4em 0.8em; border-bottom: 1px solid #ddd; vertical-align: top; }}
th {{ background: #f4f4f4; }}
.scale {{ background: #fff4d6; padding: 0.6em 1em; border-left: 4px solid #e0a800; }}
.missing {{ color: #8a5a00; }}
</style></head>
<body>
<h1>Temporal Recurrence Favors Fewer Layers (arXiv 2609.12531): reproduction reports</h1>
<div class="scale">{banner}</div>
<table>
<tr><th>Paper item</th><th>Target</th><th>Report</th><th>Scale</th><th>Config (digest), rendered (UTC)</th></tr>
{rows}
</table>
<p>Index built {built}.</p>
</body></html>
"""


def report_job(options: jobs.Report, study: Study) -> int:
    """`report`: the notebook executed with its parameters and the config's, rendered, with its provenance."""
    parameters = dict(param.split("=", 1) for param in options.param)
    provenance = {"paper": options.paper, "scale": study.scale, "config_files": list(options.config_files),
                  "config_digest": study.digest}
    parameters |= {"config_path": options.config[-1], "scale": study.scale, "description": study.description}
    render(options.notebook, options.html, options.executed, options.meta, parameters, provenance)
    print(f"{options.html}: rendered from {options.notebook}")
    return 0


def index_job(options: jobs.Index, study: Study) -> int:
    """`index`: reports/index.html from the reports' sidecar JSON."""
    write_index(options.meta, options.out, study)
    print(f"{options.out}: {len(options.meta)} reports")
    return 0
