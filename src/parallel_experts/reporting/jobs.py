"""The options of the `report` and `index` commands, without the notebook machinery (the CLI builds its parser from
them); `render.report_job` and `render.index_job` run them."""

from __future__ import annotations

from dataclasses import dataclass

from parallel_experts.config.options import config_files, option, output


@dataclass(frozen=True, kw_only=True)
class Report:
    """execute a notebook with papermill and render it to HTML"""

    config: tuple[str, ...] = config_files()
    notebook: str = option()
    html: str = output()
    executed: str = output("where the executed notebook is kept")
    meta: str = output("sidecar JSON read by the index")
    paper: str = option("the paper's figure or table this report reproduces", default="")
    config_files: tuple[str, ...] = option("the config files the workflow was given", nargs="*", default=())
    param: tuple[str, ...] = option("notebook parameters", "-p", "--param", nargs="*", action="extend",
                                    metavar="KEY=VALUE", default=())


@dataclass(frozen=True, kw_only=True)
class Index:
    """write reports/index.html from the reports' sidecar JSON"""

    config: tuple[str, ...] = config_files()
    out: str = output()
    meta: tuple[str, ...] = option(None, "meta", nargs="+")
