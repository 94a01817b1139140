"""Where a configuration may read and write: inside the project, or in a folder it names as external.

The rule: every path a config gives (`PATH_KEYS`), and every default it implies, resolves inside the project
(the working directory the workflow and its jobs run in) or inside one of the folders listed in the config's
`external`, after symbolic links are followed, so a link cannot lead out either. A run folder's checkpoint and
weights are read only from files that resolve inside that folder (`inside`, core/run_folder.member). Paths that a
user types on the command line (`--tokens`, `--out`, `--boxoban`) are named on purpose and are not checked.

Writes follow the same rule (`outside`, which core/atomic.writable applies to every write of a result, a report,
a run folder's lock, attempts and TensorBoard files, and the compile cache): a path named inside the project that
a symbolic link takes out of it, to no `external` folder, is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from parallel_experts.config.errors import ConfigError, quote

# every config key that names a file or folder (a list: each of its items)
PATH_KEYS = ("compile_cache", "sokoban.boxoban.root", "sokoban.boxoban.cache", "lm.corpus.files", "lm.corpus.cache_dir")


_external: list[Path] = []  # the `external` folders of the config this process loaded (`allow`), resolved


def allow(config: Mapping) -> None:
    """Let this process write (`outside`) into the folders that `config` lists as `external`, too."""
    _external[:] = [Path(folder).resolve() for folder in config.get("external", [])]


def outside(path: str | Path) -> Path | None:
    """Where `path` really leads, if it lies in the working directory as named but a symbolic link takes it out of
    the project and out of every `external` folder; None otherwise. A path named outside the project (a test's
    folder, a command's --out) is the caller's choice and is not judged."""
    project = Path.cwd()
    named = Path(os.path.normpath(project / path))
    if not named.is_relative_to(project):
        return None
    resolved = named.resolve()
    if any(resolved.is_relative_to(folder) for folder in [project.resolve(), *_external]):
        return None
    return resolved


def inside(path: str | Path, folder: str | Path) -> bool:
    """Whether `path` resolves (symbolic links followed) to `folder` or below it."""
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def check(config: Mapping, project: str | Path | None = None) -> None:
    """Refuse a path-valued key of `config` that resolves outside `project` (default: the working directory) and
    outside every folder of its `external` list, naming the key, the path and what it resolves to."""
    project = Path.cwd() if project is None else Path(project)
    external = [(f"external[{i}]", folder) for i, folder in enumerate(config.get("external", []))]
    for key, value in [*external, *_paths(config)]:
        if "\0" in value:  # the OS refuses it in every call: name it here, not in a traceback
            raise ConfigError(f"{key}: {quote(value)} holds a NUL byte, which no path can hold")
    allowed = [project, *(project / folder for _, folder in external)]
    for key, value in _paths(config):
        if not any(inside(project / value, folder) for folder in allowed):
            raise ConfigError(f"{key}: {quote(value)} resolves to {(project / value).resolve()}, outside the "
                              f"project {project.resolve()}; list it, or a folder above it, in the config's `external` "
                              "to use it")


def _paths(config: Mapping) -> Iterator[tuple[str, str]]:
    """(key, path) of every path `config` gives; it has passed the schema, so every block on the way is a mapping."""
    for key in PATH_KEYS:
        *parents, name = key.split(".")
        block = config
        for parent in parents:
            block = block.get(parent, {})
        value = block.get(name)
        if isinstance(value, str):  # compile_cache may be false
            yield key, value
        elif isinstance(value, list):
            yield from ((f"{key}[{i}]", item) for i, item in enumerate(value))
