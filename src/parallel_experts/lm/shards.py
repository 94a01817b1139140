"""What language-model training reads: modded-nanogpt token shards, the streaming sampler, the vocabulary.

* `read_shard` checks and maps one shard back (header of 256 little-endian int32: magic 20240520,
  version 1, token count N; then N little-endian uint16 GPT-2 ids, each < 50,257); `shard_paths` finds a folder's
  validation shard 0 and its training shards;
* `stream_windows` is the authors' "stream_equal_chunks" sampler (LM/shared_fineweb_dataloader.py): S equal
  streams per shard, windows of T+1 tokens with stride T, a reset flag on the first batch;
* `compact_vocabulary` / `load_tokens` give the model's ids, GPT-2's or a demo's smaller vocabulary.
Errors name the file (or the source key) and what was expected, as `DataError`s the CLI prints in one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from parallel_experts.config.errors import PipelineError

EOT = 50256  # GPT-2's <|endoftext|>, the document separator of the FineWeb shards
N_VOCAB = 50257
MAGIC, VERSION = 20240520, 1
HEADER_INTS = 256
HEADER_BYTES = 4 * HEADER_INTS


class DataError(PipelineError, ValueError):
    """Language-model data that cannot be used (a file, a source, a request), phrased as one line."""


class ShardError(DataError):
    """A token shard that breaks the format; the message names the file and what was wrong."""


# --------------------------------------------------------------------------------------------------
# Token shards (modded-nanogpt / llm.c format)


def read_shard(path: str | Path) -> np.ndarray:
    """The tokens of one shard as a read-only uint16 memory map, after checking header and size."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            header = np.frombuffer(file.read(HEADER_BYTES), "<i4")
    except OSError as error:
        raise ShardError(f"{path}: cannot read ({error.strerror})") from None
    if header.size < HEADER_INTS:
        raise ShardError(f"{path}: {size} bytes, too short for the {HEADER_BYTES}-byte header")
    if header[0] != MAGIC:
        raise ShardError(f"{path}: magic number {header[0]}, expected {MAGIC} (not a token shard)")
    if header[1] != VERSION:
        raise ShardError(f"{path}: version {header[1]}, expected {VERSION}")
    count = int(header[2])
    if count < 0 or size != HEADER_BYTES + 2 * count:
        raise ShardError(
            f"{path}: {size} bytes, expected {HEADER_BYTES + 2 * count} "
            f"(a {HEADER_BYTES}-byte header and the {count} uint16 tokens it announces)"
        )
    if count == 0:
        return np.zeros(0, np.uint16)
    tokens = np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(count,))
    if tokens.max() >= N_VOCAB:  # the embedding lookup would clamp it silently, or the vocabulary map fail
        position = int(np.argmax(tokens >= N_VOCAB))
        raise ShardError(f"{path}: token {tokens[position]} at position {position} is not a GPT-2 id (expected "
                         f"< {N_VOCAB})")
    return tokens


def shard_name(index: int, prefix: str = "fineweb") -> str:
    """`{prefix}_val_000000.bin` for shard 0, `{prefix}_train_{index:06d}.bin` after it."""
    return f"{prefix}_{'val' if index == 0 else 'train'}_{index:06d}.bin"


def shard_paths(folder: str | Path) -> tuple[Path, list[Path]]:
    """(validation shard, training shards in name order) of a folder of shards (the authors' `*val*`, `*train*`)."""
    folder = Path(folder)
    validation, training = sorted(folder.glob("*_val_*.bin")), sorted(folder.glob("*_train_*.bin"))
    if len(validation) != 1 or not training:
        raise DataError(f"{folder}: expected one *_val_*.bin and at least one *_train_*.bin shard, found "
                        f"{len(validation)} and {len(training)}")
    return validation[0], training


# --------------------------------------------------------------------------------------------------
# The streaming sampler ("stream_equal_chunks")


def num_batches(n_tokens: int, streams: int, window: int) -> int:
    """n_b = 1 + ⌊(ℓ − (T+1)) / T⌋ with ℓ = ⌊N/S⌋, or 0 when a stream is shorter than T+1 tokens."""
    length = n_tokens // streams
    return 0 if length < window + 1 else 1 + (length - (window + 1)) // window


def stream_windows(tokens, streams: int, window: int, start: int = 0
                   ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The batches of one shard: (inputs int32 (S, T), labels int32 (S, T), reset bool (S,)) each.

    The shard is split into S streams of ℓ = ⌊N/S⌋ tokens (stream j starts at jℓ, the tail is dropped);
    batch k takes tokens [jℓ + kT, jℓ + kT + T + 1) of every stream j, so consecutive windows share one
    token; inputs are its first T tokens, labels its last T, and every stream is reset in batch 0 only.
    """
    if streams < 1 or window < 1:
        raise DataError(f"streams and window must be at least 1, got streams={streams}, window={window}")
    tokens = np.asarray(tokens)  # a view, not a copy, of a memory map
    length = len(tokens) // streams
    offsets = np.arange(streams)[:, None] * length + np.arange(window + 1)[None, :]
    for k in range(start, num_batches(len(tokens), streams, window)):
        chunk = np.asarray(tokens[offsets + k * window], dtype=np.int32)
        yield chunk[:, :-1], chunk[:, 1:], np.full(streams, k == 0)


# --------------------------------------------------------------------------------------------------
# The model's vocabulary


def compact_vocabulary(training: Sequence[Path], size: int) -> np.ndarray | None:
    """A map from GPT-2 ids to `size` model ids, or None when the model keeps GPT-2's ids (size ≥ 50,257).

    For CPU-sized demos only: the size − 1 most frequent ids of the training shards keep an id of their own
    (by decreasing frequency, ties by id), every other id shares the last one. Losses over a compact
    vocabulary are not comparable with GPT-2-vocabulary losses; the reports say so.
    """
    if size >= N_VOCAB:
        return None
    counts = sum(np.bincount(read_shard(path), minlength=N_VOCAB) for path in training)
    order = np.lexsort((np.arange(N_VOCAB), -counts))
    mapping = np.full(N_VOCAB, size - 1, np.int32)
    mapping[order[: size - 1]] = np.arange(size - 1)
    return mapping


def model_shards(folder: str | Path, size: int) -> tuple[np.ndarray | None, Path, list[Path]]:
    """(the map to a model's `size` ids or None, the validation shard, the training shards) of a folder of shards."""
    validation, training = shard_paths(folder)
    read_shard(validation)  # checked before any training, though only the evaluation reads it
    return compact_vocabulary(training, size), validation, training


def load_tokens(path: Path, vocabulary: np.ndarray | None):
    """A shard's tokens as the model's ids: the memory map itself, or its ids mapped through `vocabulary`."""
    tokens = read_shard(path)
    return tokens if vocabulary is None else vocabulary[tokens]


CHUNK = 64  # tokens per chunk of the streaming validation loss (lm.evaluate)


def check_fit(n_tokens: int, window: int, streams: int, lanes: int, chunk: int = CHUNK) -> None:
    """That `streams` split into blocks of `lanes` and that a validation shard of `n_tokens` leaves every stream
    a scored chunk after the ⌈window/chunk⌉ warm-up chunks (config validation checks it before any training)."""
    if streams % lanes:
        raise DataError(f"evaluation streams {streams} must be a multiple of lanes {lanes}")
    warmup = math.ceil(window / chunk)
    if num_batches(n_tokens, streams, chunk) <= warmup:
        raise DataError(f"a validation shard of {n_tokens} tokens gives no scored chunk for {streams} streams of "
                        f"{chunk}-token chunks after {warmup} warm-up chunks (window {window}): give fewer streams")
