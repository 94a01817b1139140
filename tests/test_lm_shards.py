"""What training reads: the shard format checked against an independent writer, the sampler, the vocabulary."""

import numpy as np
import pytest
from helpers import independent_shard_bytes

from parallel_experts.config.errors import PipelineError
from parallel_experts.lm import shards
from parallel_experts.lm.corpus import write_shard
from parallel_experts.lm.shards import ShardError, read_shard, stream_windows


def test_our_reader_reads_an_independently_written_shard(tmp_path):
    tokens = [5, 50255, 0, 50256, 1234]
    path = tmp_path / "b.bin"
    path.write_bytes(independent_shard_bytes(tokens))
    got = read_shard(path)
    assert got.dtype == np.uint16 and got.tolist() == tokens
    empty = tmp_path / "empty.bin"
    empty.write_bytes(independent_shard_bytes([]))
    assert read_shard(empty).tolist() == []

@pytest.mark.parametrize(
    "raw, expected",
    [
        (independent_shard_bytes([1, 2], magic=12345), "magic number 12345, expected 20240520"),
        (independent_shard_bytes([1, 2], version=2), "version 2, expected 1"),
        (independent_shard_bytes([1, 2, 3])[:-2], "1028 bytes, expected 1030"),
        (independent_shard_bytes([1, 2]) + b"\0\0", "1030 bytes, expected 1028"),
        (b"\x00" * 100, "100 bytes, too short"),
        (independent_shard_bytes([1, 50257, 3]), "token 50257 at position 1 is not a GPT-2 id \\(expected < 50257\\)"),
        (independent_shard_bytes([1, 2, 65535]), "token 65535 at position 2 is not a GPT-2 id"),
    ],
)
def test_reader_errors_name_the_file_and_the_problem(tmp_path, raw, expected):
    path = tmp_path / "bad_shard.bin"
    path.write_bytes(raw)
    with pytest.raises(ShardError, match=expected) as caught:
        read_shard(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, PipelineError) and isinstance(caught.value, ValueError)


# --------------------------------------------------------------------------------------------------
# Streaming sampler


def test_stream_windows_hand_checked_example():
    tokens = np.arange(100, 123, dtype=np.uint16)  # N = 23
    batches = list(stream_windows(tokens, streams=2, window=4))  # ℓ = 11, n_b = 1 + ⌊(11 − 5)/4⌋ = 2
    assert len(batches) == shards.num_batches(23, 2, 4) == 2
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
    assert shards.num_batches(9, 2, 4) == 0  # ℓ = 4 < T + 1
    assert list(stream_windows(np.arange(9), 2, 4)) == []
    assert shards.num_batches(10, 2, 4) == 1  # ℓ = 5 = T + 1 exactly
    assert shards.num_batches(48_828 * 2048, 2048, 64) == 762  # a 10^8-token shard in 2,048 streams of 64
    with pytest.raises(shards.DataError, match="streams"):
        list(stream_windows(np.arange(9), 0, 4))

def test_stream_windows_resume_mid_shard():
    tokens = np.arange(100, dtype=np.uint16)
    whole = list(shards.stream_windows(tokens, streams=2, window=8))
    tail = list(shards.stream_windows(tokens, streams=2, window=8, start=3))
    assert len(tail) == len(whole) - 3
    for (x, y, r), (a, b, c) in zip(whole[3:], tail):
        np.testing.assert_array_equal(x, a)
        np.testing.assert_array_equal(y, b)
        assert not c.any() and not r.any()


# --------------------------------------------------------------------------------------------------
# The model's vocabulary


def test_compact_vocabulary_keeps_the_most_frequent_ids(tmp_path):
    shard = write_shard(tmp_path / "t.bin", [7, 7, 7, 3, 3, 9, 9, 50256, 1])
    mapping = shards.compact_vocabulary([shard], 4)
    # counts: 7 ×3, 3 ×2, 9 ×2 (ties by id: 3 before 9), then everything else shares id 3
    assert mapping[[7, 3, 9]].tolist() == [0, 1, 2]
    assert mapping[[50256, 1, 0, 12345]].tolist() == [3, 3, 3, 3]
    np.testing.assert_array_equal(shards.load_tokens(shard, mapping), [0, 0, 0, 1, 1, 2, 2, 3, 3])
    assert shards.compact_vocabulary([shard], 50304) is None
