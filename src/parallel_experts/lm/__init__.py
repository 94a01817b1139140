"""Language modelling on FineWeb-style data: GPT-2 tokens, token shards and the streaming sampler."""
