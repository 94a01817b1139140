"""No script in a rendered report: hostile strings from a config (`description`, `plan.<family>.device`), a results
file or a file name are rendered into every kind of report page and the HTML is parsed back: no <script>, no `on…`
attribute, no javascript: or data: URL survives, and harmless Markdown still renders."""

import copy
import json
import re
from html.parser import HTMLParser

import nbformat
import pandas as pd
import pytest
from helpers import REPO
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from parallel_experts.config import files
from parallel_experts.planning import costs, memory
from parallel_experts.planning import tables as plan_tables
from parallel_experts.reporting import markup
from parallel_experts.reporting import render as reports
from parallel_experts.study import Study

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    '<a href="javascript:alert(1)">x</a>',
    "<svg onload=alert(1)>",
    '"><script>alert(1)</script>',
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">x</a>',
    '<a href="&#106;avascript:alert(1)">x</a>',
    "[x](&#106;avascript:alert(1))",
    '<a href=" &#x09;java&#x0A;script:alert(1)">x</a>',
    "<iframe src=javascript:alert(1)></iframe>",
    '<div style="x" onmouseover="alert(1)">x</div>',
]
HARMLESS = "*emphasised* and `code`, see [the plan](plan.html), [the paper](https://arxiv.org/abs/2609.12531)"
# What a browser would run or load: a script element, frames and plugins, an event handler, a script or data URL.
BANNED_TAGS = {"script", "iframe", "object", "embed", "frame", "base"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "poster", "background", "srcset"}
# The raster images the template embeds (a figure): data URLs that cannot run anything.
EMBEDDED_IMAGE = re.compile(r"data:image/(png|jpeg);base64,")


class Dangers(HTMLParser):
    """Collects what a browser would run in a page. html.parser decodes entities in attribute values, as a browser
    does; a URL's scheme is then read as a browser reads it: leading control characters and spaces dropped, tabs
    and newlines anywhere removed, case ignored."""

    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        if tag in BANNED_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}>")
            if name in URL_ATTRIBUTES and value is not None:
                url = re.sub(r"[\t\n\r]", "", value).lstrip("".join(map(chr, range(33)))).lower()
                if tag == "img" and name == "src" and EMBEDDED_IMAGE.match(url):
                    continue
                if url.startswith(("javascript:", "vbscript:", "data:")):
                    self.found.append(f"<{tag} {name}={value!r}>")


def dangers(page: str) -> list[str]:
    parser = Dangers()
    parser.feed(page)
    parser.close()
    return parser.found


@pytest.mark.parametrize("hostile", HOSTILE)
def test_each_hostile_string_would_run_unsanitised_and_does_not_after(hostile):
    # The table is hostile and the checker sees it: Markdown rendered as nbconvert renders it, unsanitised.
    assert dangers(markdown2html_mistune(hostile)), hostile
    assert dangers(markup.markdown(hostile)) == []
    assert dangers(markup.sanitise(hostile)) == []
    assert dangers(markup.sanitise(markdown2html_mistune(hostile))) == []
    assert dangers(markup.markdown(markup.scale_banner("demo", hostile))) == []  # the description's banner


@pytest.mark.parametrize("hostile", HOSTILE)
def test_plain_text_shows_as_typed_and_a_file_name_never_becomes_a_scheme(hostile):
    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.text = [], ""

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

        def handle_data(self, data):
            self.text += data

    parsed = Text()
    parsed.feed(f"<p>{markup.text(hostile)}</p>")
    assert parsed.tags == ["p"] and parsed.text == hostile  # no element, and nothing lost
    link = f'<a href="{markup.url(hostile + ".html")}">x</a>'
    assert dangers(link) == [] and 'href="' in link


def test_harmless_markdown_still_renders():
    page = markup.markdown(markup.scale_banner("demo", HARMLESS))
    assert "<strong>Scale: demo.</strong>" in page and "<em>emphasised</em>" in page and "<code>code</code>" in page
    assert '<a href="plan.html"' in page and '<a href="https://arxiv.org/abs/2609.12531"' in page
    assert '<a href="mailto:a@example.org"' in markup.markdown("[mail](mailto:a@example.org)")


def test_a_styled_table_keeps_its_css_and_loses_hostile_cells():
    frame = pd.DataFrame({"device": HOSTILE, "n": range(len(HOSTILE))})
    styled = (frame.style.hide(axis="index").set_properties(**{"text-align": "left"})
              .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}]))
    page = markup.sanitise(styled.to_html())
    assert dangers(styled.to_html()) and dangers(page) == []
    assert re.search(r"<style[^>]*>[^<]*text-align: left", page) and "<table" in page and "<td" in page
    # CSS is not parsed by the sanitiser: a <style> that could fetch anything (url(), @import) is dropped whole.
    for css in ("td { background: url(https://example.org/x.png) }", "@import 'https://example.org/x.css';",
                "td { background: u\\72l(x.png) }"):
        assert markup.sanitise(f"<style>{css}</style><p>x</p>") == "<p>x</p>"


def test_every_kind_of_output_reaches_the_page_sanitised_and_the_page_has_no_script():
    hostile = " ".join(HOSTILE)
    outputs = [{"text/markdown": hostile, "text/plain": "md"}, {"text/html": hostile, "text/plain": "html"},
               {"application/javascript": "alert(1)", "text/plain": "js"},
               {"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>', "text/plain": "svg"},
               {"text/plain": hostile}, {"text/markdown": HARMLESS, "text/plain": "md"}]
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Outputs"),
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("display_data", data=data) for data in outputs]
                                  + [nbformat.v4.new_output("stream", name="stdout", text=hostile)])])
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    unsanitised, _ = exporter.from_notebook_node(copy.deepcopy(notebook))
    assert {"<img onerror>", "<svg onload>"} <= set(dangers(unsanitised))
    page = reports.offline(exporter.from_notebook_node(reports.safe_outputs(notebook))[0])
    assert dangers(page) == [] and "<script" not in page.lower()
    assert "<em>emphasised</em>" in page and '<a href="plan.html"' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # text/plain and the stream: shown as typed


def write_plan(config, folder, wildcards):
    """A plan of one training job priced at the config's assumption, with its memory check, as `plan` writes it:
    the device name reaches the throughput's source, the plan's chart, the paper calibration and the memory table."""
    job = costs.Job("sokoban_train", wildcards, 1e15, "benchmark.tsv")
    study = Study.of(config)
    rate = costs.assumed_rate(study, job)
    seconds = job.flops / rate.flops_per_s
    table = pd.DataFrame([{"target": "fig2", "rule": job.rule, "wildcards": job.wildcards, "group": job.group,
                           "shown": True, "flops": job.flops, "flops_per_s": rate.flops_per_s, "source": rate.source,
                           "device": rate.device,
                           "seconds": seconds, "devices": 1, "measured_seconds": float("nan"), "seeds": 1,
                           "budget": "small", "remat": False, "runtime_s": 600, "resubmissions": 0, "device_hours": seconds / 3600,
                           "attempts": 2, "finishes": False}])
    table.attrs["targets"] = ["fig2"]
    check = pd.DataFrame({"rule": [job.rule], "wildcards": [wildcards], "measured_seconds": [60.0],
                          "held_out_seconds": [float("nan")], "assumed_seconds": [30.0]})
    plan_tables.write(study, table, check, costs.paper_efficiency(study.plan, table), folder)
    rehearsal = {"programs": [{"jobs": [[job.rule, wildcards]], "peak_bytes": 2e9, "backend": "cpu"}]}
    memory.write(memory.per_job(study.plan, table, rehearsal), rehearsal, folder)


def test_the_plan_page_and_the_index_with_a_hostile_description_device_and_results(tmp_path, monkeypatch):
    hostile = " ".join(HOSTILE)
    config = copy.deepcopy(files.load([REPO / "config" / "smoke.yaml"]))
    config["description"] = f"{HARMLESS}. {hostile}"
    config["plan"] = {"default": {"device": hostile, "peak_tflops": 1.0, "efficiency": 0.5, "memory_gb": 1.0}}
    write_plan(config, tmp_path / "plan", wildcards=f"run={hostile}")
    out = tmp_path / "reports"
    reports.render(REPO / "workflow" / "notebooks" / "plan.ipynb", out / "plan.html", out / "plan.ipynb",
                   out / "plan.json", parameters={"plan": str(tmp_path / "plan" / "targets.csv"),
                                                  "paper_plan": str(tmp_path / "plan" / "targets.csv"),
                                                  "scale": config["scale"], "description": config["description"]},
                   provenance={"scale": "smoke", "config_files": [hostile], "config_digest": hostile,
                               "paper": "plan"})
    page = (out / "plan.html").read_text()
    executed = (out / "plan.ipynb").read_text()
    assert "onerror=alert(1)" in executed  # the strings did reach the notebook's outputs
    assert dangers(page) == [] and "<script" not in page.lower()
    assert "<em>emphasised</em>" in page and '<a href="plan.html"' in page  # the description's Markdown
    assert "1 of 1 jobs would not fit their device" in page  # the memory section rendered, device table included

    # The index: the description, and a report's metadata (a results file) whose every field is hostile.
    # Its path, relative to the index, would read as a javascript: URL if it were not encoded.
    monkeypatch.chdir(tmp_path)
    meta = json.loads((out / "plan.json").read_text())
    meta.update(html="javascript:alert(1)//plan.html", title=hostile, scale=hostile, rendered=hostile)
    (out / "plan.json").write_text(json.dumps(meta))
    reports.write_index([out / "plan.json"], "index.html", Study.of(config))
    index = (tmp_path / "index.html").read_text()
    assert dangers(index) == [] and "<em>emphasised</em>" in index
    assert 'href="javascript%3Aalert%281%29/plan.html"' in index  # the file name stays a relative path


def test_every_table_a_page_shows_is_built_by_the_escaping_helper():
    """pandas' Styler escapes nothing unless told, also after a `.format` call: the only `.style` in the notebooks and
    the library is markup.table's, so that no table is built without it."""
    sources = [*(REPO / "workflow/notebooks").glob("*.ipynb"), *(REPO / "src/parallel_experts").rglob("*.py")]
    built = sorted(path.name for path in sources if re.search(r"\.style\b(?! import)", path.read_text()))
    assert built == ["markup.py"], built


def test_a_table_shows_markup_in_cells_names_and_labels_as_typed():
    frame = pd.DataFrame({"<b>name</b>": ["<style>body{display:none}</style>", "<img src=x>"], "n": [1.5, 2.5]},
                         index=["<i>one</i>", "<i>two</i>"])
    for page in (markup.sanitise(markup.table(frame).to_html()),
                 markup.sanitise(markup.table(frame, {"n": "{:.0f}"}, index=True).to_html())):
        assert not re.search(r"<(b|i|img)\b", page) and page.count("<style") == 1, page  # the table's own CSS
        assert "&lt;style&gt;body{display:none}&lt;/style&gt;" in page


def test_html_in_any_markdown_output_shows_as_typed():
    """A summary line holding a device name, a corpus file or a reason: its tags are text, its Markdown renders."""
    page = markup.markdown(markup.bullets(["on <b title=x>a GPU</b><style>p{color:red}</style>", "**bold**"]))
    assert "<b" not in page and "<style" not in page and "<strong>bold</strong>" in page
    assert "&lt;b title=x&gt;a GPU&lt;/b&gt;" in page
