"""Streaming validation loss with an attention window W, the same scored tokens for both families (paper §5.2).

The validation shard is split by the training sampler into S streams read in chunks of C = 64 tokens. Each
stream starts from an empty state; its first ⌈W/C⌉ chunks are processed but not scored, every later token is
scored with teacher forcing. The state is what each family carries along a stream:
* non-recurrent: per layer and expert, the keys and values of the last W tokens (positions are absolute
  stream positions), so every token attends to itself and the W − 1 tokens before it at every layer;
* recurrent (W must equal the model's cache length M): the shared state and the per-level caches, exactly
  as in training, so the loss is the streaming loss the authors' recurrent trainer validates with.
Streams are processed in blocks of `lanes` (memory only). The result is the mean cross-entropy over the
scored tokens and their count, which equals (⌊(ℓ−1)/C⌋ − ⌈W/C⌉)·S·C for streams of ℓ = ⌊N/S⌋ tokens.
"""

from __future__ import annotations

import json
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import xarray as xr

from parallel_experts.core.definitions import named
from parallel_experts.lm import experiment, jobs, shards, train
from parallel_experts.lm.models import KVCache, RecurrentState, RecurrentTransformer, Transformer, logits
from parallel_experts.lm.shards import CHUNK, check_fit, stream_windows
from parallel_experts.results import store


def _empty_state(model, window: int, lanes: int):
    if isinstance(model, RecurrentTransformer):
        one = RecurrentState.zeros(model.config, window)
    else:
        one = KVCache.empty(model.config, window)
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (lanes, *x.shape)), one)


@eqx.filter_jit
def _chunk_nll(model, state, inputs, labels, start, window: int):
    """Summed token NLL of one chunk of every stream in a block, and the streams' states after it."""
    def stream(state, tokens, targets):
        if isinstance(model, RecurrentTransformer):
            shared, state = model.segment(state, tokens, window)
            out = logits(model.head, shared)
        else:
            out, state = model.chunk(tokens, start + jnp.arange(tokens.shape[0]), state, window)
        return optax.softmax_cross_entropy_with_integer_labels(out, targets).sum(), state

    nll, state = eqx.filter_vmap(stream)(state, inputs, labels)
    return nll.sum(), state


def validation_loss(model: Transformer | RecurrentTransformer, tokens, window: int, streams: int,
                    lanes: int | None = None, chunk: int = CHUNK) -> tuple[float, int]:
    """(mean cross-entropy in nats, number of scored tokens) of `tokens` at attention window `window` (for the
    recurrent model, its cache length M)."""
    lanes = streams if lanes is None else lanes
    check_fit(len(tokens), window, streams, lanes, chunk)
    warmup = math.ceil(window / chunk)
    states = [_empty_state(model, window, lanes) for _ in range(streams // lanes)]
    scored_nll = []  # kept on the device, summed once at the end in float64: no host sync per chunk
    for k, (inputs, labels, _) in enumerate(stream_windows(tokens, streams, chunk)):
        for block, state in enumerate(states):
            rows = slice(block * lanes, (block + 1) * lanes)
            nll, states[block] = _chunk_nll(model, state, inputs[rows], labels[rows], jnp.int32(k * chunk), window)
            if k >= warmup:
                scored_nll.append(nll)
    scored = len(scored_nll) * lanes * chunk
    return math.fsum(float(x) for x in scored_nll) / scored, scored


def as_dataset(run, loss: float, scored: int, spec: dict, validation_path):
    return xr.Dataset(
        {"validation_loss": ((), loss, {"long_name": f"validation cross-entropy, {run.window}-token window",
                                        "units": "nats/token"}),
         "scored_tokens": ((), scored, {"long_name": "validation tokens scored"})},
        attrs={"run": run.id, "window": run.window, "streams": spec["streams"], "chunk": CHUNK,
               "validation_shard": str(validation_path)})


def job(options: jobs.Evaluate, runs: experiment.Families) -> int:
    """`lm-evaluate`: the sliding-window validation loss of the trained run `options.run`, as netCDF."""
    run = named(runs.by_id, options.run, options.config)
    spec = json.loads(options.evaluation)
    vocabulary, validation, _ = shards.model_shards(options.tokens, run.model.vocab)
    model = train.load_model(run.model, options.run_dir)
    loss, scored = validation_loss(model, shards.load_tokens(validation, vocabulary), run.window, spec["streams"],
                                   spec["lanes"])
    store.write_netcdf(as_dataset(run, loss, scored, spec, validation), options.out)
    print(f"{options.out}: validation loss {loss:.4f} over {scored} tokens (window {run.window})")
    return 0
