"""The results layer: where every result lives (paths), reading and writing them (store), the allocation grids,
and every number quoted from the paper and from other systems, beside which ours are shown. It imports neither
domain."""
