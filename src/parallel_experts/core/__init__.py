"""What both domains share: the experts and their aggregation, budgets and work proxies, run definitions, FLOP
counting, checkpoints, run folders and atomic writes."""
