"""What defines a language-model run besides its data: the model (one allocation of one family) and the training
settings, each a frozen dataclass that checks itself. No JAX here, so that the workflow, the planner and the
reports can build and read runs without loading it; `models` and `train` build and train what these describe.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from parallel_experts.config.errors import ConfigError
from parallel_experts.config.settings import read_only
from parallel_experts.core import budget
from parallel_experts.core.aggregation import AGGREGATIONS, is_routed
from parallel_experts.core.precision import DEFAULT as JAX_DEFAULT_PRECISION
from parallel_experts.core.precision import check as check_precision

PADDED_VOCAB = 50304  # GPT-2's 50,257 ids padded to a multiple of 128 (the authors' LM/nanogpt/config.py)
DTYPE_BYTES = {"bfloat16": 2, "float32": 4}  # the model dtypes (lm.dtype), bytes per value
KV_CACHES = ("level", "expert")  # the recurrent model's rolling caches: one per depth level, or one per expert
# How the Transformer attends within a training window: our query blocks (`models.attend`), or
# `jax.nn.dot_product_attention` by XLA or by cuDNN's fused flash-attention kernel (GPU, bfloat16), which the GPU
# check times beside ours (issue 42: our Transformer trained at 0.3x the authors' speed on an H200).
ATTENTIONS = ("blocked", "xla", "cudnn")


@dataclass(frozen=True)
class ModelConfig:
    """One allocation of one family: depth L, experts E, width d, heads; vocabulary and dtype."""

    depth: int
    experts: int
    width: int
    q_heads: int
    kv_heads: int
    vocab: int = PADDED_VOCAB
    recurrent: bool = False
    aggregation: str = "sqrt_sum"  # of expert outputs; merged keys/values always use sqrt-sum (paper App. D)
    dtype: str = "bfloat16"
    kv_cache: str = "level"  # recurrent only: one cache per level of merged proposals, or one per expert (App. A.3)
    attention: str = "blocked"  # non-recurrent only: one of ATTENTIONS

    def __post_init__(self) -> None:
        if self.width % self.q_heads or self.q_heads % self.kv_heads:
            raise ConfigError(f"width {self.width}, {self.q_heads} query and {self.kv_heads} KV heads: "
                              "heads must divide the width and KV heads the query heads")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(f"aggregation {self.aggregation!r}: expected one of {AGGREGATIONS}")
        if is_routed(self.aggregation) and not self.recurrent:
            raise ConfigError(f"aggregation {self.aggregation!r}: the non-recurrent Transformer has no router")
        if self.kv_cache not in KV_CACHES:
            raise ConfigError(f"kv_cache {self.kv_cache!r}: expected one of {KV_CACHES}")
        if self.kv_cache != "level" and not self.recurrent:
            raise ConfigError(f"kv_cache {self.kv_cache!r}: the non-recurrent Transformer has no shared cache to split")
        if self.attention not in ATTENTIONS:
            raise ConfigError(f"attention {self.attention!r}: expected one of {ATTENTIONS}")
        if self.attention != "blocked" and self.recurrent:
            raise ConfigError(f"attention {self.attention!r}: the recurrent model attends with one query per token "
                              "step, which a fused kernel does not speed up")
        if self.attention == "cudnn" and self.dtype != "bfloat16":
            raise ConfigError(f"attention 'cudnn' with dtype {self.dtype!r}: cuDNN's fused attention takes bfloat16")

    @property
    def head_dim(self) -> int:
        return self.width // self.q_heads

    def cache_shape(self, memory: int) -> tuple[int, ...]:
        """One stream's rolling keys (and as many values) of the recurrent model: (L, M, K, hd), or (L, M, E, K, hd)
        with a cache per expert."""
        per_expert = (self.experts,) if self.kv_cache == "expert" else ()
        return (self.depth, memory, *per_expert, self.kv_heads, self.head_dim)


def family_attention(recurrent: bool, attention: str) -> str:
    """The attention a family's model takes from `lm.attention`: the Transformer that one, the recurrent model always
    our blocks (it attends with one query per token step, which a fused kernel does not speed up)."""
    return ModelConfig.attention if recurrent else attention


@dataclass(frozen=True)
class TrainConfig:
    sequence: int  # T: the window of an independent sequence (non-recurrent) or a TBPTT segment (recurrent)
    # M (`memory_for`): a key of every stored run definition (run locks, rule params), so it keeps its name
    memory: int = 0
    batch_tokens: int = 131_072  # tokens per optimiser update, equal for both families
    microbatch: int = 512  # streams per forward/backward pass
    train_tokens: int = 1_310_720_000  # 10,000 updates
    reg: float = 1e-4  # pre_output_reg_cost of the recurrent loss
    log_every: int = 10  # updates per point of the learning curve
    checkpoint_every: int = 100  # updates
    schedule: str = "authors"  # where the matrix learning rate's cosine ends (optim.SCHEDULES)
    # How float32 matmuls compute on the device, in this run's every job (core/precision.py; `study.load` sets it): the
    # bfloat16 model's matmuls are bfloat16 whatever it says; a float32 model's on a GPU change with it.
    matmul_precision: str = JAX_DEFAULT_PRECISION

    def __post_init__(self) -> None:
        where = "lm.training"
        if self.batch_tokens % self.sequence or (self.batch_tokens // self.sequence) % self.microbatch:
            raise ConfigError(f"{where}: batch_tokens {self.batch_tokens} must split into streams of "
                              f"{self.sequence} tokens, in groups of microbatch {self.microbatch} streams")
        check_precision(self.matmul_precision, f"{where}.matmul_precision")
        if self.checkpoint_every % self.log_every:
            raise ConfigError(f"{where}: checkpoint_every {self.checkpoint_every} must be a multiple of "
                              f"log_every {self.log_every}, so that a resumed run logs the same curve")
        if self.updates < 1:
            raise ConfigError(f"{where}: train_tokens {self.train_tokens} is less than one update "
                              f"({self.batch_tokens} tokens)")

    @property
    def streams(self) -> int:
        return self.batch_tokens // self.sequence

    @property
    def groups(self) -> int:
        return self.streams // self.microbatch

    @property
    def updates(self) -> int:
        return self.train_tokens // self.batch_tokens

    @property
    def warmup(self) -> int:
        """Windows at the start of each shard that only warm up the recurrent state: ⌈M/T⌉."""
        return math.ceil(self.memory / self.sequence)


def memory_for(window: int, recurrent: bool) -> int:
    """M, the tokens whose keys and values a model carries from one training window to the next. The recurrent model
    carries its rolling KV cache, as long as its attention window W (paper §5: 128 or 1,024 tokens); the
    non-recurrent model carries nothing: its training sequences are independent, and W is the window of its
    sliding-window evaluation."""
    return window if recurrent else 0


# ------------------------------------------------------------------------------------------------ the config's section
# `lm` as typed values, read once from a schema-valid config (`LmSettings.of`). Each class is one block of the schema
# and its fields are the block's keys (tests/test_settings.py compares them). The corpus and the systems tables'
# blocks stay read-only mappings: the corpus is a tagged union (demo, files, hf, pretokenized) that the workflow hands
# to the tokens job verbatim, and `systems` fills the tables' defaults.

SEGMENT = 64  # lm.training.segment: the recurrent model's TBPTT window (the authors' LM/recnanogpt/train.py)


@dataclass(frozen=True)
class Training:
    """`lm.training`: TrainConfig's settings as the config gives them, the microbatch in tokens (None: TrainConfig's,
    or, for the recurrent model, bounded by `microbatch_cache_gb` where given), and the recurrent segment."""

    batch_tokens: int = TrainConfig.batch_tokens
    microbatch_tokens: int | None = None
    microbatch_cache_gb: float | None = None
    segment: int = SEGMENT
    reg: float = TrainConfig.reg
    schedule: str = TrainConfig.schedule
    log_every: int = TrainConfig.log_every
    checkpoint_every: int = TrainConfig.checkpoint_every
    matmul_precision: str = TrainConfig.matmul_precision


@dataclass(frozen=True)
class Evaluation:
    """`lm.evaluation`: the validation streams, and how many are evaluated together (memory only)."""

    streams: int = 2048
    lanes: int = 256


@dataclass(frozen=True)
class Ablation:
    """`lm.ablations.<setting>`: one allocation ([L, E, d] or [L, E, d, H, K]) of one budget at one window, trained
    once per value of the setting, with these seeds (None: the budget's)."""

    budget: str
    window: int
    allocation: tuple[int, ...]
    values: tuple
    seeds: tuple[int, ...] | None = None

    @classmethod
    def of(cls, spec: Mapping) -> Ablation:
        seeds = spec.get("seeds")
        return cls(spec["budget"], spec["window"], tuple(spec["allocation"]), tuple(spec["values"]),
                   None if seeds is None else tuple(seeds))


@dataclass(frozen=True)
class LmSettings:
    """`lm`."""

    corpus: Mapping  # where the tokens come from: demo, files, hf or pretokenized
    shard_tokens: int
    vocabulary: int
    dtype: str
    head_dim: int
    windows: tuple[int, ...]
    train_tokens: int
    budgets: Mapping[str, budget.BudgetSpec]
    aggregation: str | None = None  # None: ModelConfig's
    attention: str = ModelConfig.attention  # the Transformer's; the recurrent model's is always the default
    training: Training = Training()
    evaluation: Evaluation = Evaluation()
    ablations: Mapping[str, Ablation] = field(default_factory=lambda: MappingProxyType({}))
    latency: Mapping | None = None  # Table 5's block as the config gives it (lm.systems fills its defaults)
    throughput: Mapping | None = None  # Table 6's

    @classmethod
    def of(cls, config: Mapping) -> LmSettings:
        """The LM settings of a schema-valid config."""
        lm = config["lm"]
        return cls(read_only(lm["corpus"]), lm["shard_tokens"], lm["vocabulary"], lm["dtype"], lm["head_dim"],
                   tuple(lm["windows"]), lm["train_tokens"],
                   MappingProxyType({name: budget.BudgetSpec.of(spec) for name, spec in lm["budgets"].items()}),
                   lm.get("aggregation"), lm.get("attention", ModelConfig.attention),
                   Training(**lm.get("training", {})), Evaluation(**lm.get("evaluation", {})),
                   MappingProxyType({name: Ablation.of(spec) for name, spec in lm.get("ablations", {}).items()}),
                   *(read_only(lm[table]) if table in lm else None for table in ("latency", "throughput")))

    @property
    def proxy(self) -> budget.Proxy:
        return budget.Proxy("lm", windows=self.windows, head_dim=self.head_dim)

    @property
    def tables(self) -> dict[str, Mapping]:
        """The systems tables the config defines (Tables 5 and 6), by name."""
        return {name: table for name, table in (("latency", self.latency), ("throughput", self.throughput))
                if table is not None}

    @property
    def shape(self) -> dict:
        """What every model of the config shares, the systems tables' too: `head_dim`, `vocabulary`, `dtype`, and the
        Transformer's `attention` where it is not the default (the tables' rule params stay as they were)."""
        shared = {"head_dim": self.head_dim, "vocabulary": self.vocabulary, "dtype": self.dtype}
        return shared | ({} if self.attention == ModelConfig.attention else {"attention": self.attention})

