"""The options of the `rehearse` command, without JAX (the CLI builds its parser from them); `programs.job` runs it."""

from __future__ import annotations

from dataclasses import dataclass

from parallel_experts.config.options import config_files, option, output


@dataclass(frozen=True, kw_only=True)
class Rehearse:
    """compile every distinct program of the config's DAG at its exact shapes with abstract inputs; per program:
    compile seconds, parameters, XLA's FLOPs and memory per device (JSON)"""

    config: tuple[str, ...] = config_files()
    out: str = output()
    only: tuple[str, ...] | None = option("compile only the programs with these keys", nargs="+", metavar="KEY",
                                          group="what", default=None)
    part: int | None = option("compile only part N of the programs (rehearsal.programs.parts)", type=int,
                              metavar="N", group="what", default=None)
    merge: tuple[str, ...] | None = option("compile nothing: merge the parts' files, which must hold every program "
                                           "of the config", nargs="+", metavar="FILE", group="what", default=None)
    levels: str | None = option("the Sokoban training level set (sokoban-levels): also run training updates for real "
                                "at the config's shapes (sokoban.rehearsal_updates)", default=None)
    run_dir: str | None = output("where those runs checkpoint", folder=True, default=None)
    seeds: int | None = option("train this many of each run's seeds (default: all of them, or as many as fit this "
                               "machine)", type=int, default=None)
