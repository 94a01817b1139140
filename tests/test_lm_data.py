"""The language-model data pipeline: GPT-2 ids, the shard format both ways, sharding, the sampler, text sources."""

import json
import socket
import struct

import numpy as np
import pytest

from parallel_experts.errors import PipelineError
from parallel_experts.lm import data
from parallel_experts.lm.data import (
    EOT,
    ShardError,
    gpt2_encoding,
    read_shard,
    stream_windows,
    text_documents,
    tokenize_documents,
    write_shard,
    write_shards,
)

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
# Shard format


def _independent_shard_bytes(tokens, magic=20240520, version=1, count=None):
    count = len(tokens) if count is None else count
    header = struct.pack("<256i", magic, version, count, *([0] * 253))
    return header + struct.pack(f"<{len(tokens)}H", *tokens)


def test_our_writer_matches_an_independent_reader(tmp_path):
    tokens = [0, 1, 50256, 65535, 258, 7]
    path = write_shard(tmp_path / "a.bin", np.array(tokens))
    raw = path.read_bytes()
    assert len(raw) == 1024 + 2 * len(tokens)
    magic, version, count = struct.unpack_from("<3i", raw, 0)
    assert (magic, version, count) == (20240520, 1, len(tokens))
    assert struct.unpack_from("<253i", raw, 12) == (0,) * 253
    assert np.frombuffer(raw[1024:], "<u2").tolist() == tokens
    assert raw == _independent_shard_bytes(tokens)
    assert not [p for p in tmp_path.iterdir() if p.name != "a.bin"]  # no temporary left behind


def test_our_reader_reads_an_independently_written_shard(tmp_path):
    tokens = [5, 65535, 0, 50256, 1234]
    path = tmp_path / "b.bin"
    path.write_bytes(_independent_shard_bytes(tokens))
    got = read_shard(path)
    assert got.dtype == np.uint16 and got.tolist() == tokens
    empty = tmp_path / "empty.bin"
    empty.write_bytes(_independent_shard_bytes([]))
    assert read_shard(empty).tolist() == []


@pytest.mark.parametrize(
    "raw, expected",
    [
        (_independent_shard_bytes([1, 2], magic=12345), "magic number 12345, expected 20240520"),
        (_independent_shard_bytes([1, 2], version=2), "version 2, expected 1"),
        (_independent_shard_bytes([1, 2, 3])[:-2], "1028 bytes, expected 1030"),
        (_independent_shard_bytes([1, 2]) + b"\0\0", "1030 bytes, expected 1028"),
        (b"\x00" * 100, "100 bytes, too short"),
    ],
)
def test_reader_errors_name_the_file_and_the_problem(tmp_path, raw, expected):
    path = tmp_path / "bad_shard.bin"
    path.write_bytes(raw)
    with pytest.raises(ShardError, match=expected) as caught:
        read_shard(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, PipelineError) and isinstance(caught.value, ValueError)


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
# Streaming sampler


def test_stream_windows_hand_checked_example():
    tokens = np.arange(100, 123, dtype=np.uint16)  # N = 23
    batches = list(stream_windows(tokens, streams=2, window=4))  # ℓ = 11, n_b = 1 + ⌊(11 − 5)/4⌋ = 2
    assert len(batches) == data.num_batches(23, 2, 4) == 2
    (x0, y0, r0), (x1, y1, r1) = batches
    assert x0.dtype == y0.dtype == np.int32 and r0.dtype == bool
    assert x0.shape == y0.shape == (2, 4) and r0.shape == (2,)
    # batch 0: stream 0 = tokens[0:5], stream 1 = tokens[11:16]; batch 1: tokens[4:9] and tokens[15:20]
    assert x0.tolist() == [[100, 101, 102, 103], [111, 112, 113, 114]]
    assert y0.tolist() == [[101, 102, 103, 104], [112, 113, 114, 115]]
    assert x1.tolist() == [[104, 105, 106, 107], [115, 116, 117, 118]]
    assert y1.tolist() == [[105, 106, 107, 108], [116, 117, 118, 119]]
    assert r0.tolist() == [True, True] and r1.tolist() == [False, False]


def test_stream_windows_properties_on_a_shard(tmp_path):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 50257, size=1003).astype(np.uint16)
    shard = read_shard(write_shard(tmp_path / "s.bin", tokens))
    S, T = 7, 10
    length = 1003 // 7  # 143
    batches = list(stream_windows(shard, S, T))
    assert len(batches) == 1 + (length - (T + 1)) // T == 14
    for k, (x, y, reset) in enumerate(batches):
        assert (x[:, 1:] == y[:, :-1]).all()  # labels are the inputs shifted by one
        assert reset.tolist() == [k == 0] * S
        for j in range(S):
            start = j * length + k * T
            assert x[j].tolist() == tokens[start : start + T].tolist()
            assert y[j].tolist() == tokens[start + 1 : start + T + 1].tolist()
        if k:  # consecutive windows overlap by exactly one token
            assert (batches[k - 1][1][:, -1] == x[:, 0]).all()
    assert (len(batches) - 1) * T + T < length  # the last window stays inside its stream


def test_stream_windows_edge_cases():
    assert data.num_batches(9, 2, 4) == 0  # ℓ = 4 < T + 1
    assert list(stream_windows(np.arange(9), 2, 4)) == []
    assert data.num_batches(10, 2, 4) == 1  # ℓ = 5 = T + 1 exactly
    assert data.num_batches(48_828 * 2048, 2048, 64) == 762  # SPEC C's example
    with pytest.raises(data.DataError, match="streams"):
        list(stream_windows(np.arange(9), 0, 4))


# --------------------------------------------------------------------------------------------------
# Text sources


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
    with pytest.raises(data.DataError, match="'text' column"):
        list(text_documents({"files": [no_text], "format": "json", "cache_dir": cache}))


def test_text_documents_rejects_bad_sources(tmp_path):
    with pytest.raises(data.DataError, match="exactly one of the keys"):
        list(text_documents({"path": "x"}))
    with pytest.raises(data.DataError, match="format"):
        list(text_documents({"files": ["a.txt"], "format": "csv"}))
    with pytest.raises(data.DataError, match="missing.txt: no such file"):
        list(text_documents({"files": [tmp_path / "missing.txt"]}))


def test_stream_windows_resume_mid_shard():
    tokens = np.arange(100, dtype=np.uint16)
    whole = list(data.stream_windows(tokens, streams=2, window=8))
    tail = list(data.stream_windows(tokens, streams=2, window=8, start=3))
    assert len(tail) == len(whole) - 3
    for (x, y, r), (a, b, c) in zip(whole[3:], tail):
        np.testing.assert_array_equal(x, a)
        np.testing.assert_array_equal(y, b)
        assert not c.any() and not r.any()


def test_demo_corpus_is_eight_public_domain_books_of_prose():
    files = data.demo_corpus_files()
    assert [f.name for f in files] == list(data.DEMO_CORPUS) and len(files) == 8
    assert not any("Pulp Fiction" in f.name or "Crome Yellow" in f.name for f in files)
    assert 5_000_000 < sum(f.stat().st_size for f in files) < 6_000_000
    opening = files[0].read_text(encoding="utf-8-sig")[:200]
    assert "It is a truth universally acknowledged" in opening  # Pride and Prejudice, chapter 1


def test_corpus_shards_of_local_files_and_the_shard_folder(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("the cat sat on the mat. " * 200)
    paths = data.corpus_shards({"files": [str(text), str(text)], "format": "text"}, tmp_path / "shards", 500)
    validation, training = data.shard_paths(tmp_path / "shards")
    assert paths == [validation, *training] and validation.name == "fineweb_val_000000.bin"
    tokens = np.concatenate([data.read_shard(p) for p in paths])
    one = 1 + len(data.gpt2_encoding().encode_ordinary(text.read_text()))
    assert tokens.size == 2 * one and (tokens == data.EOT).sum() == 2  # two documents, each after its EOT
    capped = data.corpus_shards({"files": [str(text)], "format": "text", "max_tokens": 900}, tmp_path / "cap", 500)
    assert [len(data.read_shard(p)) for p in capped] == [500, 400]
    with pytest.raises(data.DataError, match="fill only the validation shard"):
        data.corpus_shards({"files": [str(text)], "format": "text"}, tmp_path / "one", 10**6)
    with pytest.raises(data.DataError, match="expected one \\*_val_\\*.bin"):
        data.shard_paths(tmp_path)


def test_compact_vocabulary_keeps_the_most_frequent_ids(tmp_path):
    shard = data.write_shard(tmp_path / "t.bin", [7, 7, 7, 3, 3, 9, 9, 50256, 1])
    mapping = data.compact_vocabulary([shard], 4)
    # counts: 7 ×3, 3 ×2, 9 ×2 (ties by id: 3 before 9), then everything else shares id 3
    assert mapping[[7, 3, 9]].tolist() == [0, 1, 2]
    assert mapping[[50256, 1, 0, 12345]].tolist() == [3, 3, 3, 3]
    np.testing.assert_array_equal(data.load_tokens(shard, mapping), [0, 0, 0, 1, 1, 2, 2, 3, 3])
    assert data.compact_vocabulary([shard], 50304) is None


def test_pretokenized_download_fails_fast_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(data.DataError, match="cannot download fineweb_val_000000.bin from kjj0/fineweb10B-gpt2"):
        data.corpus_shards({"pretokenized": {"train_shards": 1}}, tmp_path, 100)
