"""The optimiser of both language models (the authors' LM/nanogpt/optim.py and LM/recnanogpt/optim.py):
global-norm clip, then one rule per parameter group.

* `embed` (token embedding) and `head` (LM head): AdamW at a constant learning rate scaled with the width as
  (d/768)^-1/2, no weight decay;
* `other` (every matrix of the stacked `blocks` / `levels`): Muon on the warm-up-cosine `schedule`, followed by
  cautious weight decay on the same schedule;
* `gate` (the routers of the routed aggregation rules, recurrent model only): AdamW on the same schedule plus
  cautious decay, the authors' default for gate parameters (PRE_fineweb/recnanogpt/optim.py, without
  `--muon_gates`).

Muon orthogonalises matrices, so each leaf says which of its axes are the matrix (`muon_dimensions`): query, key
and value are orthogonalised per head as d_in × h_d, the output projection per head as h_d × d, the MLP and W_in
whole; every other axis (depth L, experts E, heads) is a batch axis. A leaf whose name is not known raises
instead of being guessed. First moments (Adam's and Muon's) are float32 even for bfloat16 parameters, Adam's
second moment follows the parameters, as in the authors' code. The updates stay float32: `optax.apply_updates`
adds them to the (bfloat16) parameters in float32 and rounds the sum to the parameters' dtype, once, as the
authors' code does (no float32 master copy). Pass `eqx.filter(model, eqx.is_array)` as the parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from optax.contrib import MuonDimensionNumbers

from parallel_experts.config.errors import PipelineError

GROUP_OF_FIELD = {"embed": "embed", "head": "head", "routers": "gate"}  # top-level model fields
PER_HEAD = MuonDimensionNumbers(reduction_axis=-3, output_axis=-1)  # query/key/value (..., d_in, heads, h_d)
MATRIX = MuonDimensionNumbers(reduction_axis=-2, output_axis=-1)  # out (..., heads, h_d, d), up, down, mix
MUON_VIEWS = {"query": PER_HEAD, "key": PER_HEAD, "value": PER_HEAD, "out": MATRIX, "up": MATRIX,
              "down": MATRIX, "mix": MATRIX}
REFERENCE_WIDTH = 768  # the embed/head learning rates are quoted at this width
# Where the cosine of the matrix schedule reaches min_lr: `authors`, warm-up steps before the last update (their
# decay_steps = total − warm-up, which optax counts with the warm-up), then min_lr held; `total`, at the last update.
SCHEDULES = ("authors", "total")


class OptimError(PipelineError, ValueError):
    """A model or a request the optimiser cannot handle, phrased as one line."""


@dataclass(frozen=True)
class OptimConfig:
    """The optimiser's hyper-parameters; defaults are the non-recurrent Transformer's (the authors' LM/nanogpt/)."""

    peak_lr: float = 0.02  # max(max_lr = 6e-4, 0.02): the authors floor Muon's peak at 0.02
    min_lr: float = 6e-6  # 0.01 · max_lr; the recurrent code takes 0.01 · 0.02 (see `for_family`)
    max_warmup: int = 300
    warmup_fraction: float = 0.01
    embed_lr: float = 0.2  # at width 768
    head_lr: float = 0.004  # at width 768
    adam_betas: tuple[float, float] = (0.8, 0.95)
    adam_eps: float = 1e-10
    ns_coeffs: tuple[float, float, float] = (3.4445, -4.775, 2.0315)
    ns_steps: int = 5
    muon_beta: float = 0.95
    muon_eps: float = 1e-8
    cautious_decay: float = 0.01
    clip_norm: float = 1.0
    schedule: str = "authors"  # one of SCHEDULES

    def __post_init__(self):
        if self.schedule not in SCHEDULES:
            raise OptimError(f"schedule {self.schedule!r}: expected one of {', '.join(SCHEDULES)}")

    @classmethod
    def for_family(cls, recurrent: bool) -> OptimConfig:
        return replace(cls(), min_lr=2e-4) if recurrent else cls()

    def warmup_steps(self, total_steps: int) -> int:
        return int(min(self.max_warmup, self.warmup_fraction * total_steps))


def schedule(config: OptimConfig, total_steps: int) -> optax.Schedule:
    """Learning rate of the matrix group: linear from min_lr to the peak over the warm-up w, then a cosine back
    to min_lr, reached at total − w and held for the last w updates (`authors`), or reached at `total_steps`
    (`total`). optax's `decay_steps` counts the warm-up too."""
    if total_steps < 1:
        raise OptimError(f"total_steps {total_steps}: expected at least one optimiser update")
    warmup = config.warmup_steps(total_steps)
    end = total_steps - warmup if config.schedule == "authors" else total_steps
    return optax.warmup_cosine_decay_schedule(config.min_lr, config.peak_lr, warmup, decay_steps=end,
                                              end_value=config.min_lr)


def _names(path) -> list[str]:
    """Field names (or dict keys, indices) from the root to a leaf; never empty."""
    return [str(getattr(k, "name", getattr(k, "key", getattr(k, "idx", k)))) for k in path] or [""]


def param_labels(model):
    """"embed" / "head" / "gate" / "other" at every array leaf, None elsewhere (the filtered model's structure)."""

    def label(path, leaf):
        return GROUP_OF_FIELD.get(_names(path)[0], "other") if eqx.is_array(leaf) else None

    return jax.tree_util.tree_map_with_path(label, model)


def muon_dimensions(model):
    """The matrix view of each Muon leaf, found by its field name; None for the AdamW groups and non-matrices."""

    def view(path, leaf):
        names = _names(path)
        if not eqx.is_array(leaf) or names[0] in GROUP_OF_FIELD or leaf.ndim < 2:
            return None
        if names[-1] not in MUON_VIEWS:
            raise OptimError(f"parameter {jax.tree_util.keystr(path)} of shape {leaf.shape}: no Muon matrix view "
                             f"is known for {names[-1]!r} (expected one of {sorted(MUON_VIEWS)})")
        return MUON_VIEWS[names[-1]]

    return jax.tree_util.tree_map_with_path(view, model)


class CautiousDecayState(NamedTuple):
    count: jax.Array  # updates seen, the schedule's step


def cautious_weight_decay(rate: float, schedule: optax.Schedule) -> optax.GradientTransformation:
    """u ← u − η_t · rate · p · 1[u·p ≥ 0] elementwise, for every parameter of rank ≥ 2 (the authors'
    LM/nanogpt/optim.py).

    u is optax's additive update, which already carries −η_t. The authors' comment says "decay only where
    update and parameter are aligned", and their test u·p ≥ 0 on the additive update decays the coordinates the
    step moves away from zero. Cautious weight decay as published (Chen et al. 2025, arXiv 2510.12402) masks
    with the descent direction instead (u·p ≤ 0). We reproduce the authors' code (LM/nanogpt/optim.py).
    """

    def init(params):
        del params
        return CautiousDecayState(jnp.zeros([], jnp.int32))

    def update(updates, state, params=None):
        if params is None:
            raise ValueError("cautious weight decay needs the parameters: call update(updates, state, params)")
        eta = schedule(state.count)  # the same step index Muon's learning rate used for these updates

        def decay(u, p):
            if u.ndim < 2:
                return u
            return (u - eta * rate * jnp.where(u * p >= 0, p, 0)).astype(u.dtype)

        return jax.tree.map(decay, updates, params), CautiousDecayState(optax.safe_increment(state.count))

    return optax.GradientTransformation(init, update)


def optimizer(model, config: OptimConfig, total_steps: int) -> optax.GradientTransformation:
    """The full optimiser for `model` (an Equinox model or a pytree with `embed`, `head` and stacked matrices)."""
    muon_dimensions(model)  # an unknown matrix fails here, not at the first update under jit
    widths = [leaf.shape[-1] for path, leaf in jax.tree_util.tree_leaves_with_path(model)
              if eqx.is_array(leaf) and _names(path)[0] == "embed"]
    if not widths:
        raise OptimError("the model has no `embed` field: the embed/head learning rates need the width d")
    scale = (widths[0] / REFERENCE_WIDTH) ** -0.5
    b1, b2 = config.adam_betas
    lr = schedule(config, total_steps)

    def adamw(learning_rate):
        return optax.adamw(learning_rate, b1, b2, config.adam_eps, weight_decay=0.0, mu_dtype=jnp.float32)

    muon = optax.contrib.muon(
        lr, config.ns_coeffs, config.ns_steps, config.muon_beta, config.muon_eps, mu_dtype=jnp.float32,
        nesterov=True, adaptive=False, adam_b1=b1, adam_b2=b2, muon_weight_dimension_numbers=muon_dimensions)
    decay = cautious_weight_decay(config.cautious_decay, lr)
    groups = {"embed": adamw(config.embed_lr * scale), "head": adamw(config.head_lr * scale),
              "gate": optax.chain(adamw(lr), decay), "other": optax.chain(muon, decay)}
    return optax.chain(optax.clip_by_global_norm(config.clip_norm), optax.multi_transform(groups, param_labels))
