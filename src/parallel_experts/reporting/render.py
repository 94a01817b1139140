"""Rendering reports: papermill runs a notebook with parameters, nbconvert turns it into code-free HTML.

Every report gets a sidecar JSON (what produced it, when) from which `write_index` builds reports/index.html.
Pages must show everything offline: figures are embedded images, tables are HTML, and the CDN scripts that
nbconvert's template links (require.js, MathJax) are removed because nothing on our pages needs them.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import nbformat
import papermill
from nbconvert import HTMLExporter

from parallel_experts.config.errors import PipelineError
from parallel_experts.core import atomic
from parallel_experts.reporting import catalogue

REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=[\"']https?://[^\"']*[\"'][^>]*>\s*</script>\s*", re.IGNORECASE)
MATHJAX_CONFIG = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->\s*", re.DOTALL)


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
    papermill.execute_notebook(
        str(notebook), str(executed_path), parameters=dict(parameters), kernel_name="python3",
        progress_bar=False, cwd=str(Path.cwd()),
    )
    executed = nbformat.read(executed_path, as_version=4)
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(executed)
    atomic.write_text(html_path, offline(body))
    meta = {"notebook": str(notebook), "html": str(html_path), "title": title_of(executed),
            "rendered": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **provenance}
    atomic.write_text(meta_path, json.dumps(meta, indent=2))


def offline(page: str) -> str:
    """Drop remote scripts; fail loudly if anything else on the page still points at the network."""
    page = MATHJAX_CONFIG.sub("", REMOTE_SCRIPT.sub("", page))
    remote = re.findall(r"""(?:src|href)=["'](https?://[^"']+)""", page)
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


def write_index(meta_paths: Sequence[str | Path], index_path: str | Path, config: Mapping) -> None:
    """reports/index.html, by paper item (catalogue.index_items): its target, its report with the scale, config
    and date that rendered it, or why it is missing (the config lacks what the item needs, or it did not render)."""
    index_path = Path(index_path)
    metas = {Path(m["html"]).stem: m for m in (json.loads(Path(p).read_text()) for p in meta_paths)}
    rows = []
    for item, found in catalogue.index_items(config):
        cells = [html.escape(item.paper), f"<code>{html.escape(item.target)}</code>" if item.target else ""]
        if not found:
            rows.append(_row(cells, f'<td colspan="3" class="missing">missing: it needs '
                                    f"{html.escape(item.needs)} in the config</td>"))
        for report in found:
            meta = metas.get(report.name)
            if meta is None:
                rows.append(_row(cells, f'<td colspan="3" class="missing">missing: reports/{html.escape(report.name)}'
                                        ".html was not rendered</td>"))
                continue
            link = os.path.relpath(meta["html"], index_path.parent)
            rows.append(_row(cells, f"<td><a href=\"{html.escape(link)}\">{html.escape(meta['title'])}</a></td>"
                                    f"<td>{html.escape(meta['scale'])}</td>"
                                    f"<td><code>{html.escape(' '.join(meta['config_files']))}</code> "
                                    f"({html.escape(meta['config_digest'])}), {html.escape(meta['rendered'])}</td>"))
    atomic.write_text(index_path, INDEX_TEMPLATE.format(
        rows="\n".join(rows),
        scale=html.escape(config["scale"]),
        description=html.escape(config["description"]),
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
<p class="scale"><strong>Scale: {scale}.</strong> {description}</p>
<table>
<tr><th>Paper item</th><th>Target</th><th>Report</th><th>Scale</th><th>Config (digest), rendered (UTC)</th></tr>
{rows}
</table>
<p>Index built {built}.</p>
</body></html>
"""
