"""What every report notebook does first, in one call: the display settings, the scale banner at the top of the
page, and the configuration that produced the results it shows."""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown, display

from parallel_experts.analysis import comparison
from parallel_experts.config import files
from parallel_experts.results import snapshot


def begin(scale: str, description: str, config_path: str | None = None, precision: int = 3) -> dict | None:
    """Show the banner of the page's scale and what the config reduced; return the config read from
    `config_path` (the workflow's snapshot, results/config.json), if given."""
    pd.set_option("display.precision", precision)
    display(Markdown(comparison.scale_banner(scale, description)))
    if not config_path:
        return None
    config = files.load([config_path])
    snapshot.verify(config, config_path)
    return config
