"""What the two systems tables share (Tables 5 and 6, paper App. H): their rows, how a row becomes a model,
the ratio to the Transformer, the paper's numbers beside ours, and how a table's dataset describes itself.

Every row spends the same work per token as the Transformer L16 E1 at the same width (L·E = 16 blocks, by the
authors' proxy), so the tables compare how fast equal work runs, not how much there is. Width, heads, vocabulary and
dtype come from the config (`lm.latency.width` or `lm.throughput.width`, `lm.head_dim`, `lm.vocabulary`,
`lm.dtype`); the paper: d = 768, 8 query and 4 KV heads, GPT-2's padded vocabulary, bfloat16.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import xarray as xr

from parallel_experts.config.errors import ConfigError
from parallel_experts.lm.settings import ModelConfig, TrainConfig, family_attention, memory_for
from parallel_experts.results import store

TRANSFORMER = (False, 16, 1)  # (recurrent, L, E): the reference row of both tables
SHALLOWEST = (True, 1, 16)  # the recurrent row of one level: the GPU check's Table 5 row beside the Transformer
LATENCY_ROWS = (TRANSFORMER, SHALLOWEST, (True, 2, 8), (True, 4, 4), (True, 8, 2), (True, 16, 1))
THROUGHPUT_ROWS = LATENCY_ROWS[:5]  # the paper's Table 6 has no recurrent L16 E1


def settings(tables: Mapping, table: str, defaults: Mapping) -> dict:
    """A table's block (`lm.latency`, `lm.throughput`) of `tables` (a validated config's `lm`, or the study's
    `lm.tables`), its protocol's defaults filled in."""
    if table not in tables:
        raise ConfigError(f"lm.{table}: missing; this config defines no {table} table")
    return dict(defaults) | dict(tables[table])


def selected(rows: Sequence[tuple[bool, int, int]], spec: Mapping) -> list[tuple[bool, int, int]]:
    """The rows a table's settings keep (`rows`: labels, for test-sized configs), in the paper's order; the
    Transformer is always kept, since every ratio is to it."""
    keep = set(spec.get("rows", map(label, rows))) | {label(TRANSFORMER)}
    return [row for row in rows if label(row) in keep]


def label(row: tuple[bool, int, int]) -> str:
    recurrent, depth, n_experts = row
    return f"{'recurrent' if recurrent else 'Transformer'} L{depth} E{n_experts}"


def model_config(row: tuple[bool, int, int], width: int, lm: Mapping) -> ModelConfig:
    """The model of one row at `width`, with the config's head width, vocabulary and dtype (KV heads: half), and the
    Transformer's attention."""
    recurrent, depth, n_experts = row
    heads = width // lm["head_dim"]
    attention = family_attention(recurrent, lm.get("attention", ModelConfig.attention))
    return ModelConfig(depth, n_experts, width, heads, max(1, heads // 2), vocab=lm["vocabulary"],
                       recurrent=recurrent, dtype=lm["dtype"], attention=attention)


def train_config(model_config: ModelConfig, context: int, batch_tokens: int) -> TrainConfig:
    """The training settings of one Table 6 cell: B = batch_tokens / C streams of C tokens in one microbatch (the
    recurrent model: segment C, cache M = C)."""
    return TrainConfig(sequence=context, memory=memory_for(context, model_config.recurrent),
                       batch_tokens=batch_tokens, microbatch=batch_tokens // context,
                       train_tokens=batch_tokens * 1000)


def throughput_cell(tables: Mapping, shape: Mapping, row: tuple[bool, int, int], context: int
                    ) -> tuple[ModelConfig, TrainConfig]:
    """The model and training settings of a cell of the Table 6 job of `tables` (`settings`: its width and tokens
    per update), for all of its devices; `shape`: the models' head width, vocabulary and dtype (`model_config`)."""
    spec = throughput_settings(tables)
    model = model_config(row, spec["width"], shape)
    return model, train_config(model, context, spec["batch_tokens"])


def dataset(rows: Sequence[tuple[bool, int, int]], variables: Mapping, coords: Mapping, config: Mapping,
            settings: Mapping, machine: Mapping) -> xr.Dataset:
    """One table's measurements over (allocation, ...), with the rows' L, E and family, the machine that ran
    them, the table's settings and the config."""
    allocation = {"allocation": [label(r) for r in rows], "recurrent": ("allocation", [r[0] for r in rows]),
                  "depth": ("allocation", [r[1] for r in rows]), "experts": ("allocation", [r[2] for r in rows])}
    ds = xr.Dataset(dict(variables), coords=allocation | dict(coords),
                    attrs={"machine": json.dumps(dict(machine)), "settings": json.dumps(dict(settings))})
    return store.with_provenance(ds, config)


def ratio_to_transformer(values: xr.DataArray) -> xr.DataArray:
    """Each row's value over the Transformer's at the same coordinates."""
    return values / values.sel(allocation=label(TRANSFORMER))


LATENCY_DEFAULTS = {"steps": 64, "warmup": 3, "rounds": 20}  # our protocol; the paper gives only medians (App. H.1)


def latency_settings(tables: Mapping) -> dict:
    """`lm.latency` of `tables` (`settings`) with the protocol's defaults filled in."""
    return settings(tables, "latency", LATENCY_DEFAULTS)


THROUGHPUT_DEFAULTS = {"steps": 4, "rounds": 5, "flops_up_to": 0}  # 15 timed updates in all; the authors timed 4
SKIPPED = 1  # the first update of a turn, excluded from its median (the first touch of a fresh state's memory)
PEAK_UPDATES = 2  # updates run before a cell's peak memory is read (the second reuses the donated state)


def throughput_settings(tables: Mapping) -> dict:
    """`lm.throughput` of `tables` (`settings`) with the defaults filled in; B = batch_tokens / C must be whole."""
    spec = settings(tables, "throughput", THROUGHPUT_DEFAULTS)
    for context in spec["contexts"]:
        if spec["batch_tokens"] % context:
            raise ConfigError(f"lm.throughput: batch_tokens {spec['batch_tokens']} is not a multiple of context "
                              f"{context}")
    if spec["steps"] <= SKIPPED:
        raise ConfigError(f"lm.throughput.steps: {spec['steps']}, expected more than the {SKIPPED} untimed update")
    return spec
