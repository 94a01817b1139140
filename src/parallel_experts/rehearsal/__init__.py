"""The rehearsal of a config's DAG: every distinct program compiled at its exact shapes with abstract inputs
(`programs`), and the Sokoban training updates that fit this machine run for real (`sokoban.rehearsal_updates`).
It compiles with JAX, so it sits above the domains and apart from `planning`, which reads its file without JAX."""
