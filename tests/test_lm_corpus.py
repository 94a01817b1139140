"""Preparing a corpus: GPT-2 ids, shards written in the modded-nanogpt format, text sources, the demo corpus."""

import json
import socket
import struct

import numpy as np
import pytest
from helpers import independent_shard_bytes

from parallel_experts.lm import corpus
from parallel_experts.lm.corpus import gpt2_encoding, text_documents, tokenize_documents, write_shard, write_shards
from parallel_experts.lm.shards import EOT, DataError, ShardError, read_shard, shard_paths

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog. It's 2024, and naïve café-goers say “hello” — "
    "don't they?\n\n  Indented line\twith a tab, numbers 1234567 and emoji 🦊.\n"
)

def _no_network(*args, **kwargs):
    raise AssertionError("network access attempted")


def test_gpt2_encoding_is_built_offline_without_network(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    encoding = gpt2_encoding.__wrapped__()  # bypass functools.cache: really build it here
    assert encoding.name == "gpt2"
    assert encoding.n_vocab == 50257
    assert encoding.encode("Hello world") == [15496, 995]

def test_gpt2_ids_match_known_values():
    encoding = gpt2_encoding()
    assert encoding is gpt2_encoding()  # cached
    assert encoding.encode("Hello world") == [15496, 995]
    assert encoding.encode(" the") == [262]
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [EOT] == [50256]
    assert encoding.eot_token == 50256
    assert encoding.n_vocab == 50257
    ids = encoding.encode_ordinary(PARAGRAPH)
    assert encoding.decode(ids) == PARAGRAPH
    assert max(ids) < 50256

def test_tokenize_documents_prefixes_each_document_with_eot():
    encoding = gpt2_encoding()
    docs = list(tokenize_documents(["Hello world", " the", "<|endoftext|>"], encoding))
    assert [d.tolist() for d in docs[:2]] == [[EOT, 15496, 995], [EOT, 262]]
    assert docs[2][0] == EOT and EOT not in docs[2][1:].tolist()  # a literal marker is ordinary text
    assert all(d.dtype == np.uint16 for d in docs)


# --------------------------------------------------------------------------------------------------
# Writing shards


def test_our_writer_matches_an_independent_reader(tmp_path):
    tokens = [0, 1, 50256, 65535, 258, 7]
    path = write_shard(tmp_path / "a.bin", np.array(tokens))
    raw = path.read_bytes()
    assert len(raw) == 1024 + 2 * len(tokens)
    magic, version, count = struct.unpack_from("<3i", raw, 0)
    assert (magic, version, count) == (20240520, 1, len(tokens))
    assert struct.unpack_from("<253i", raw, 12) == (0,) * 253
    assert np.frombuffer(raw[1024:], "<u2").tolist() == tokens
    assert raw == independent_shard_bytes(tokens)
    assert not [p for p in tmp_path.iterdir() if p.name != "a.bin"]  # no temporary left behind

def test_writer_rejects_tokens_outside_uint16(tmp_path):
    for bad in ([0, 65536], [-1, 3], [[1, 2]], [1.5]):
        with pytest.raises(ShardError, match="bad.bin"):
            write_shard(tmp_path / "bad.bin", np.array(bad))
    assert not list(tmp_path.iterdir())
    with pytest.raises(ShardError, match="missing.bin: cannot read"):
        read_shard(tmp_path / "missing.bin")

def test_write_shards_validation_first_counts_add_up_documents_start_with_eot(tmp_path):
    texts = [f"Document number {i}. " + "word " * (i % 7) for i in range(40)]
    docs = list(tokenize_documents(texts))
    paths = write_shards(iter(docs), tmp_path / "shards", shard_tokens=50, prefix="demo")
    total = sum(len(d) for d in docs)
    assert [p.name for p in paths[:3]] == ["demo_val_000000.bin", "demo_train_000001.bin", "demo_train_000002.bin"]
    assert len(paths) == -(-total // 50)
    shards = [read_shard(p) for p in paths]
    assert all(len(s) == 50 for s in shards[:-1]) and 0 < len(shards[-1]) <= 50
    stream = np.concatenate(shards)
    assert len(stream) == total
    assert stream.tolist() == np.concatenate(docs).tolist()
    starts = np.flatnonzero(stream == EOT)
    assert len(starts) == len(texts) and starts[0] == 0
    pieces = np.split(stream, starts[1:])
    assert [gpt2_encoding().decode(p[1:].tolist()) for p in pieces] == texts
    assert write_shards(iter([]), tmp_path / "none", 10) == []


# --------------------------------------------------------------------------------------------------
# Text sources and corpora


def test_text_documents_from_local_text_and_json_files(tmp_path, monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    texts = ["First book.\nSecond line.\n\nNew paragraph.", "Another document, one line."]
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"doc{i}.txt")
        paths[-1].write_text(text, encoding="utf-8")
    cache = str(tmp_path / "hf-cache")
    got = list(text_documents({"files": paths, "format": "text", "cache_dir": cache}))
    assert [g.strip() for g in got] == [t.strip() for t in texts]  # one document per file, lines kept

    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "id": i}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    assert list(text_documents({"files": [jsonl], "format": "json", "cache_dir": cache})) == texts

    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text(json.dumps({"body": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="'text' column"):
        list(text_documents({"files": [no_text], "format": "json", "cache_dir": cache}))

def test_text_documents_rejects_bad_sources(tmp_path):
    with pytest.raises(DataError, match="exactly one of the keys"):
        list(text_documents({"path": "x"}))
    with pytest.raises(DataError, match="format"):
        list(text_documents({"files": ["a.txt"], "format": "csv"}))
    with pytest.raises(DataError, match="missing.txt: no such file"):
        list(text_documents({"files": [tmp_path / "missing.txt"]}))

def test_demo_corpus_is_eight_public_domain_books_of_prose():
    files = corpus.demo_corpus_files()
    assert [f.name for f in files] == list(corpus.DEMO_CORPUS) and len(files) == 8
    assert not any("Pulp Fiction" in f.name or "Crome Yellow" in f.name for f in files)
    assert 5_000_000 < sum(f.stat().st_size for f in files) < 6_000_000
    opening = files[0].read_text(encoding="utf-8-sig")[:200]
    assert "It is a truth universally acknowledged" in opening  # Pride and Prejudice, chapter 1

def test_corpus_shards_of_local_files_and_the_shard_folder(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("the cat sat on the mat. " * 200)
    paths = corpus.corpus_shards({"files": [str(text), str(text)], "format": "text"}, tmp_path / "shards", 500)
    validation, training = shard_paths(tmp_path / "shards")
    assert paths == [validation, *training] and validation.name == "fineweb_val_000000.bin"
    tokens = np.concatenate([read_shard(p) for p in paths])
    one = 1 + len(corpus.gpt2_encoding().encode_ordinary(text.read_text()))
    assert tokens.size == 2 * one and (tokens == EOT).sum() == 2  # two documents, each after its EOT
    capped = corpus.corpus_shards({"files": [str(text)], "format": "text", "max_tokens": 900}, tmp_path / "cap", 500)
    assert [len(read_shard(p)) for p in capped] == [500, 400]
    with pytest.raises(DataError, match="fill only the validation shard"):
        corpus.corpus_shards({"files": [str(text)], "format": "text"}, tmp_path / "one", 10**6)
    with pytest.raises(DataError, match="expected one \\*_val_\\*.bin"):
        shard_paths(tmp_path)

def test_pretokenized_download_fails_fast_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError, match="cannot download fineweb_val_000000.bin from kjj0/fineweb10B-gpt2"):
        corpus.corpus_shards({"pretokenized": {"train_shards": 1}}, tmp_path, 100)
