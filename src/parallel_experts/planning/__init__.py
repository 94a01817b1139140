"""What a target costs before it runs: the job list, its FLOPs (counted by the domains) and throughput, the cost
tables. No JAX: the domains count FLOPs and hand the counts in."""
