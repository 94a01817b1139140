"""Reading and writing results: self-describing netCDF datasets (written atomically, read with one-line errors),
the configuration snapshot every job reads, and the runs of a sweep read back with their evaluations."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import xarray as xr

from parallel_experts.config.errors import PipelineError, reason
from parallel_experts.config.files import digest
from parallel_experts.config.options import option, output
from parallel_experts.core.atomic import atomic_open
from parallel_experts.core.definitions import Definition


def with_ablations(ds: xr.Dataset, ablations: Mapping[str, list[str]]) -> xr.Dataset:
    """The ablations' dataset: `ds` naming each ablation's runs ({setting: run ids in the order of its values})
    in attribute `ablations` (JSON), as a run may belong to several."""
    missing = sorted({name for ids in ablations.values() for name in ids} - set(ds["run"].values.tolist()))
    if missing:
        raise PipelineError(f"the ablations name runs whose results were not given: {', '.join(missing)}")
    return ds.assign_attrs(ablations=json.dumps(dict(ablations)))


def ablation_members(data: xr.Dataset) -> dict[str, list[str]]:
    """Each ablation's run ids in the order of its values, from an ablations dataset (with_ablations)."""
    return json.loads(data.attrs["ablations"])


def with_provenance(ds: xr.Dataset, config: Mapping) -> xr.Dataset:
    """Attach the configuration that produced `ds` (netCDF attributes must be flat strings)."""
    return ds.assign_attrs(scale=config["scale"], config_digest=digest(config), config=json.dumps(config))


def write_netcdf(ds: xr.Dataset, path: str | Path) -> None:
    """Write atomically, so a killed job never leaves a half-written result that looks finished. HDF5 builds the
    file in memory and Python writes it: a disk that refuses the write is then one OSError, not HDF5's tracebacks
    from the destructors of a half-written file."""
    built = io.BytesIO()
    ds.to_netcdf(built, engine="h5netcdf")
    with atomic_open(path) as file:
        file.write(built.getbuffer())


def open_dataset(path: str | Path, variables: Sequence[str] = (), attrs: Sequence[str] = ()) -> xr.Dataset:
    """A result file, loaded into memory, with the `variables` and `attrs` its reader uses; a missing, truncated,
    foreign or differently shaped file is one line naming it."""
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            ds = ds.load()
    except (OSError, ValueError) as error:  # h5py: OSError for a truncated file; xarray: ValueError
        advice = "; delete it to recompute it" if Path(path).is_file() else ""
        raise PipelineError(f"{path}: not a readable netCDF result ({reason(error)}){advice}") from None
    for kind, names, present in (("variable", variables, ds.variables), ("attribute", attrs, ds.attrs)):
        missing = [name for name in names if name not in present]
        if missing:
            raise PipelineError(f"{path}: not the expected result: no {kind} {missing[0]!r}; delete it to recompute it")
    return ds


D = TypeVar("D", bound=Definition)  # a domain's run


def run_results(run_type: type[D], curve_paths: Sequence[str], eval_paths: Sequence[str],
                curve_variables: Sequence[str] = (), eval_variables: Sequence[str] = ()
                ) -> Iterator[tuple[D, xr.Dataset, xr.Dataset]]:
    """(run definition, learning curves, evaluation) of each run of a sweep, checked to belong together and to
    hold the variables the sweep reads."""
    for curve_path, eval_path in zip(curve_paths, eval_paths, strict=True):
        curve = open_dataset(curve_path, curve_variables, ["run_config"])
        evaluation = open_dataset(eval_path, eval_variables, ["run"])
        try:
            run = run_type.from_dict(json.loads(curve.attrs["run_config"]))
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise PipelineError(f"{curve_path}: attribute 'run_config' is not a run's definition ({reason(error)})"
                                ) from None
        if evaluation.attrs["run"] != run.id:
            raise PipelineError(f"{eval_path} evaluates {evaluation.attrs['run']}, not {run.id} of {curve_path}")
        yield run, curve, evaluation


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """The options of a domain's `*-sweep` command: its runs' files, collected into one dataset."""

    out: str = output()
    curves: tuple[str, ...] = option("the runs' learning curves", nargs="+")
    evals: tuple[str, ...] = option("the runs' evaluations, in the same order", nargs="+")
    # A run may belong to several ablations, so their dataset names each one's runs.
    ablations: dict[str, list[str]] | None = option("JSON {setting: run ids in the order of its values}: the dataset "
                                                    "of the ablations (the domain's ablations in the config)",
                                                    type=json.loads, default=None)
