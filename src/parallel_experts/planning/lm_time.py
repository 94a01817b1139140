"""How long a language model's update takes on a GPU: a compute term and a serial term (docs/planning.md, "How an
LM job is priced").

    seconds on one GPU = F / (efficiency × peak) + n × passes / 3 × (step + per_sequence × s × d / 768)

* F: the FLOPs the GPU computes (XLA's count of a token × its tokens × the forward passes: 3 in training);
* n: the level-steps it runs one after another: the recurrent model's levels run in turn at every token of a
  segment, and its microbatch groups in turn, so an update is groups × segment × L of them; the Transformer has
  none (its layers are wide enough that their time is compute);
* s, d: the sequences (streams) per GPU in a step and their width: a step's latency grows with the rows it carries
  (Table 6 was timed at d = 768 only, so that its cost per sequence grows with d is an assumption); the experts'
  own work, s × E × d² per step, is in F;
* passes / 3: a training step is forward and backward (3 passes), an evaluation step forward only (1).

The shape comes from the authors' code: `fit` to their Table 6 (20 cells on four H100s). The scale comes from our
code where it has been timed on a GPU (`ours`, the H200 check): `calibrate` takes our compute rate from our
Transformer and scales the fit's serial latency by our recurrent timing's ratio to it. `validation` sets both beside
every GPU timing there is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from parallel_experts.config.settings import Serial
from parallel_experts.core.flops import TRAIN_PASSES
from parallel_experts.lm import systems
from parallel_experts.lm.settings import ModelConfig, TrainConfig, memory_for
from parallel_experts.results import paper

WIDTH = 768  # Table 6's width, at which `per_sequence` is fitted
PAPER_GPUS = 4  # Tables 5 and 6: four H100s, each a quarter of the batch
PAPER_LM = {"head_dim": paper.DOMAIN_CONFIG["lm"]["head_dim"], "vocabulary": paper.FINEWEB_RUN["vocabulary"],
            "dtype": paper.FINEWEB_RUN["dtype"]}
TERMS = ("compute", "steps", "sequence_steps")  # the columns `fit` may use; the serial ones are the last two

Forward = Callable[[ModelConfig, int], float]  # forward FLOPs of one token at a window (`lm.flops.forward`)


class Update(NamedTuple):
    """The work of one GPU, as the time model sees it: one training update or one evaluation pass."""

    flops: float
    steps: int  # level-steps run one after another
    sequences: int  # streams per GPU in each step
    width: int
    passes: int = TRAIN_PASSES


class Speed(NamedTuple):
    """A GPU running one code: the fraction of its peak its FLOPs run at, and a training level-step's latency."""

    peak_tflops: float
    efficiency: float
    step_s: float
    per_sequence_s: float  # more per sequence in the step, at d = WIDTH

    def compute(self, update: Update) -> float:
        return update.flops / (self.peak_tflops * 1e12 * self.efficiency)

    def serial(self, update: Update) -> float:
        latency = self.step_s + self.per_sequence_s * update.sequences * update.width / WIDTH
        return update.steps * update.passes / TRAIN_PASSES * latency

    def seconds(self, update: Update) -> float:
        return self.compute(update) + self.serial(update)


def speed(peak_tflops: float, efficiency: float, serial: Serial) -> Speed:
    """Our code's speed as the config states it (`plan.<family>`: peak_tflops, efficiency and serial)."""
    return Speed(peak_tflops, efficiency, serial.step_ms / 1e3, serial.per_sequence_us / 1e6)


# ------------------------------------------------------------------------------------------------- work


def training(model: ModelConfig, train: TrainConfig, gpus: int, forward: float) -> Update:
    """One update of `train` split over `gpus` (`forward`: FLOPs of one token): each GPU computes its share of the
    tokens, and the recurrent model runs its microbatch groups' segments level by level."""
    steps = train.groups * train.sequence * model.depth if model.recurrent else 0
    return Update(TRAIN_PASSES * forward * train.batch_tokens / gpus, steps, max(1, train.microbatch // gpus),
                  model.width)


def evaluation(model: ModelConfig, tokens: int, lanes: int, forward: float) -> Update:
    """The streaming evaluation of `tokens` on one GPU, `lanes` streams at a time (`lm.evaluate`): the recurrent
    model steps every token of a block of lanes through its levels."""
    steps = tokens // lanes * model.depth if model.recurrent else 0
    return Update(forward * tokens, steps, lanes, model.width, passes=1)


def decode(model: ModelConfig, batch: int, context: int, forward: Forward) -> Update:
    """One decoded token of a batch of `batch` streams on one GPU (Table 5): a level-step per level."""
    return Update(forward(model, context) * batch, model.depth if model.recurrent else 0, batch, model.width, 1)


# --------------------------------------------------------------------------------------- the GPU timings


class Timed(NamedTuple):
    """One GPU timing: what ran, its work on one GPU, its seconds."""

    source: str
    cell: str
    update: Update
    seconds: float


def _model(row: tuple[bool, int, int]) -> ModelConfig:
    return systems.model_config(row, WIDTH, PAPER_LM)


def table6_cell(row: tuple[bool, int, int], context: int) -> tuple[ModelConfig, TrainConfig]:
    """The model and training settings of a Table 6 cell: 131,072 tokens per update, B = 131,072 / C streams of C
    tokens over the four H100s (the recurrent model: segment C and cache C, one microbatch)."""
    return _model(row), systems.train_config(_model(row), context, paper.FINEWEB_RUN["batch_tokens"])


def cell_name(row: tuple[bool, int, int], context: int) -> str:
    return f"{systems.label(row)}, C = {context}, B = {paper.FINEWEB_RUN['batch_tokens'] // context}"


def authors_table6() -> pd.DataFrame:
    """The authors' Table 6 by cell, (recurrent, depth, experts, context): tokens/s of four H100s, and oom."""
    return paper.reference("table6_throughput").set_index(["recurrent", "depth", "experts", "context"])


def authors_per_gpu(row: tuple[bool, int, int], context: int, model: ModelConfig, train: TrainConfig,
                    gpus: int) -> float | None:
    """The authors' Table 6 tokens per second per H100 at a cell, where `model` and `train` over `gpus` are that
    cell of theirs (`table6_cell`); None where they are not, or it ran out of memory."""
    if (model, train, gpus) != (*table6_cell(row, context), PAPER_GPUS):
        return None
    theirs = authors_table6()
    if (*row, context) not in theirs.index or theirs.loc[(*row, context), "oom"]:
        return None
    return float(theirs.loc[(*row, context), "tokens_per_s"]) / PAPER_GPUS


def table6(forward: Forward) -> list[Timed]:
    """The authors' Table 6 cells that ran (paper App. H.2): seconds per update, each H100 a quarter of it."""
    found = []
    for cell in paper.reference("table6_throughput").query("not oom").itertuples():
        row, context = (bool(cell.recurrent), int(cell.depth), int(cell.experts)), int(cell.context)
        model, train = table6_cell(row, context)
        found.append(Timed("Table 6 (authors, 4 H100s)", cell_name(row, context),
                           training(model, train, PAPER_GPUS, forward(model, context)),
                           train.batch_tokens / cell.tokens_per_s))
    return found


def table5(forward: Forward) -> list[Timed]:
    """The authors' Table 5 cells of the recurrent rows (paper App. H.1): seconds per decoded token, B = 16 over
    four H100s. The Transformer's decode has no serial term here, so its rows are left out."""
    return [Timed("Table 5 (authors, 4 H100s)", f"{systems.label(row)}, C = {cell.context}, B = {cell.batch}",
                  decode(_model(row), cell.batch // PAPER_GPUS, int(cell.context), forward), cell.ms_per_token / 1e3)
            for cell in paper.reference("table5_latency").query("recurrent").itertuples()
            for row in [(True, int(cell.depth), int(cell.experts))]]


# Our code on one H200 (docs/benchmarks.md, "First measurement: one H200", 2026-12-04): one GPU's share of a
# paper run's update (32,768 tokens: the recurrent run's 16 microbatch groups of 32 streams at W = 1,024, the
# Transformer's 4 groups of 4 sequences of 2,048), and Table 5's decode at C = 2,048, B = 4. The H200 is taken as
# an H100: the same tensor cores and peak, but 1.4 times the memory bandwidth, which may flatter the serial term.
H200 = "H200 (ours)"
TRANSFORMER, RECURRENT = (False, 16, 1), (True, 16, 1)
H200_UPDATES = {TRANSFORMER: (TrainConfig(2048, memory_for(1024, False), 32768, 4), 0.429),
                RECURRENT: (TrainConfig(64, memory_for(1024, True), 32768, 32), 15.28)}
H200_DECODE = {(True, 1, 16): (2048, 4, 0.226e-3)}  # (C, B, seconds per token); the Transformer's: 1.300 ms


def _h200_update(row: tuple[bool, int, int], forward: Forward) -> Update:
    return training(_model(row), H200_UPDATES[row][0], 1, forward(_model(row), 1024))


def ours(forward: Forward) -> list[Timed]:
    """Our code's GPU timings (H200_UPDATES, H200_DECODE)."""
    found = [Timed(H200, f"{systems.label(row)}, W = 1,024, update", _h200_update(row, forward), seconds)
             for row, (_, seconds) in H200_UPDATES.items()]
    return found + [Timed(H200, f"{systems.label(row)}, C = {context}, B = {batch}, decode",
                          decode(_model(row), batch, context, forward), seconds)
                    for row, (context, batch, seconds) in H200_DECODE.items()]


# --------------------------------------------------------------------------------------------- fitting


def _terms(update: Update) -> dict[str, float]:
    """An update's columns of the least squares: each parameter's multiplier."""
    steps = update.steps * update.passes / TRAIN_PASSES
    return {"compute": update.flops, "steps": steps, "sequence_steps": steps * update.sequences * update.width / WIDTH}


def fit(timed: Sequence[Timed], peak_tflops: float, terms: Sequence[str] = TERMS) -> Speed:
    """The speed that predicts `timed` with the least squared relative error (non-negative least squares, each
    timing divided by itself), using only `terms` (a term left out is 0)."""
    columns = np.array([[_terms(t.update)[term] for term in terms] for t in timed])
    seconds = np.array([t.seconds for t in timed])
    found, _ = nnls(columns / seconds[:, None], np.ones(len(timed)))
    values = dict(zip(terms, found))
    inverse_rate = values.get("compute", 0.0)
    return Speed(peak_tflops, 1 / (inverse_rate * peak_tflops * 1e12) if inverse_rate else np.inf,
                 values.get("steps", 0.0), values.get("sequence_steps", 0.0))


def held_out(timed: Sequence[Timed], peak_tflops: float, terms: Sequence[str] = TERMS) -> list[float]:
    """Each timing's prediction from a fit to all the others (leave one out)."""
    return [fit([*timed[:i], *timed[i + 1:]], peak_tflops, terms).seconds(t.update) for i, t in enumerate(timed)]


def calibrate(authors: Speed, timed: Sequence[Timed]) -> Speed:
    """Our code's speed from our training timings `timed` (default: `ours`): the authors' shape at our scale. The
    compute rate is our Transformer's (its update has no serial term); the serial latency is the authors' times our
    recurrent updates' serial time over what their speed gives them (each a median over its timings)."""
    updates = [t for t in timed if t.update.passes == TRAIN_PASSES]
    transformer = [t for t in updates if not t.update.steps]
    recurrent = [t for t in updates if t.update.steps]
    if not transformer or not recurrent:
        raise ValueError("calibrating our speed needs a timed training update of each family; got "
                         f"{len(transformer)} of the Transformer and {len(recurrent)} recurrent")
    efficiency = float(np.median([t.update.flops / (t.seconds * authors.peak_tflops * 1e12) for t in transformer]))
    ours_compute = authors._replace(efficiency=efficiency)
    scale = float(np.median([(t.seconds - ours_compute.compute(t.update)) / authors.serial(t.update)
                             for t in recurrent]))
    return ours_compute._replace(step_s=authors.step_s * scale, per_sequence_s=authors.per_sequence_s * scale)


# ------------------------------------------------------------------------------------------ validation

COLUMNS = ["source", "cell", "measured_s", "authors_s", "held_out_s", "ours_s"]


def validation(ours_speed: Speed, forward: Forward, terms: Sequence[str] = TERMS) -> pd.DataFrame:
    """Every GPU timing there is beside the model: the authors' speed fitted to all of Table 6 (`authors_s`), each
    Table 6 cell from a fit to the other 19 (`held_out_s`), and the config's speed of our code (`ours_s`). Only
    Table 6 is fitted, at our speed's peak; Table 5 and the H200 check are predicted."""
    cells = table6(forward)
    authors = fit(cells, ours_speed.peak_tflops, terms)
    rows = [[t.source, t.cell, t.seconds, authors.seconds(t.update), loo, ours_speed.seconds(t.update)]
            for t, loo in zip(cells, held_out(cells, ours_speed.peak_tflops, terms))]
    rows += [[t.source, t.cell, t.seconds, authors.seconds(t.update), np.nan, ours_speed.seconds(t.update)]
             for t in [*table5(forward), *ours(forward)]]
    return pd.DataFrame(rows, columns=COLUMNS)


def errors(table: pd.DataFrame, column: str = "held_out_s") -> pd.Series:
    """How far each prediction lands from the measured time, as a factor of at least 1 (1.5: 50 % off either way)."""
    ratio = table[column] / table["measured_s"]
    return np.maximum(ratio, 1 / ratio)


def summary(table: pd.DataFrame) -> list[str]:
    """The validation in words: Table 6's leave-one-out errors, and how the other timings land."""
    held = errors(table).dropna()
    lines = [f"Table 6, each of its {len(held)} cells from a fit to the others: median error "
             f"{(held.median() - 1):.1%}, worst ×{held.max():.2f}"]
    for row, authors, mine in zip(table[table["held_out_s"].isna()].itertuples(),
                                  errors(table, "authors_s")[table["held_out_s"].isna()],
                                  errors(table, "ours_s")[table["held_out_s"].isna()]):
        lines.append(f"{row.source} {row.cell}: {row.measured_s:.4g} s measured; the authors' speed "
                     f"{row.authors_s:.4g} s (×{authors:.2f}), ours {row.ours_s:.4g} s (×{mine:.2f})")
    return lines


def latency(speed_: Speed) -> str:
    """A speed's serial latency in the config's words."""
    return f"{speed_.step_s * 1e3:.3g} ms + {speed_.per_sequence_s * 1e6:.3g} µs per sequence each (d = {WIDTH})"
