"""`lm-speed`: the LM time model's speed of our code refitted from a GPU check's timings (`gpu-check`'s JSON), and
the config keys it would change.

The check times our code on one GPU: one GPU's share of a training update of LM runs (`lm_train`) and of cells of
our Table 6 job (`lm_table6`), and Table 5's decode (`lm_latency`). `lm_time.calibrate` turns the training updates
into a speed (the authors' shape, fitted to their Table 6, at our compute rate and serial latency); every timing is
then set beside what the config's speed and the refitted one predict, so the change is seen before it is made. Where
the check also timed the Transformer with another attention (`gpu-check --attention`), the fastest is named with the
`lm.attention` it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.config.options import configfile, option
from parallel_experts.core import records
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import systems
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.planning import costs, lm_time
from parallel_experts.results import paths
from parallel_experts.study import Study


@dataclass(frozen=True, kw_only=True)
class LmSpeed:
    """the LM time model's speed of our code refitted from a GPU check (gpu-check's JSON): every timing beside what
    the config's speed and the refitted one predict, and the plan keys to change"""

    config: tuple[str, ...] = configfile()
    check: str = option(f"the GPU check's JSON (default: {paths.GPU_CHECK})", default=paths.GPU_CHECK)


def run(options: LmSpeed, study: Study, counters: costs.Counters) -> int:
    assumed = costs.assumption(study.plan, "lm_train", "recurrent")
    if not assumed.serial:
        raise ConfigError(f"{assumed.spec_key}.serial: missing; the LM time model prices this config's LM jobs by "
                          "their FLOPs alone, so there is no speed to refit")
    check = records.read_json(options.check, {"lm_train": dict, "lm_table6": dict}, "a GPU check")
    timed = timings(check, study.lm, counters.lm.forward, options.check)
    authors = lm_time.fit(lm_time.table6(counters.lm.forward), assumed.peak_tflops)
    try:
        refitted = lm_time.calibrate(authors, timed)
    except ValueError as error:
        raise PipelineError(f"{options.check}: {error}") from None
    print(printed(timed, assumed, refitted))
    print(attention_choice(check, study.lm.settings.attention))
    return 0


def timings(check: Mapping, lm: lm_experiment.Families, forward: lm_time.Forward, where: str
            ) -> list[lm_time.Timed]:
    """The check's timings that ended well, each as the work of one GPU: the training updates of LM runs and of
    Table 6 cells, and Table 5's recurrent decode."""
    device = f"{where} ({(check.get('machine') or {}).get('device_kind', 'unknown device')})"
    runs, found = lm.by_id, []
    for run_id, entry in _ended_well(check, "lm_train", {}, where):
        if run_id not in runs:
            raise ConfigError(f"{where}: lm_train.{run_id}: not a run of this config (the check ran at scale "
                              f"{check.get('config_scale')!r})")
        run = runs[run_id]
        update = lm_time.training(run.model, run.train, entry["job_devices"], forward(run.model, run.window))
        found.append(lm_time.Timed(device, f"{run_id}, update", update, entry["seconds_per_update"]))
    for name, entry in _ended_well(check, "lm_table6", {"row": list, "context": int}, where):
        model, train = systems.throughput_cell(lm.settings.tables, lm.settings.shape, tuple(entry["row"]),
                                               entry["context"])
        if attention(entry) != model.attention:
            continue  # the Transformer with another attention than the job's: a candidate, not the code we price
        update = lm_time.training(model, train, entry["job_devices"], forward(model, entry["context"]))
        found.append(lm_time.Timed(device, f"Table 6 {name}", update, entry["seconds_per_update"]))
    latency = check.get("lm_latency") or {}
    if latency.get("ok"):
        records.fields_of(latency, {"width": int, "batch": int, "context": int, "ms_per_token": dict},
                          f"{where}: lm_latency")
        label = systems.label(systems.SHALLOWEST)
        model = systems.model_config(systems.SHALLOWEST, latency["width"], lm.settings.shape)
        update = lm_time.decode(model, latency["batch"], latency["context"], forward)
        found.append(lm_time.Timed(device, f"Table 5 {label}, C = {latency['context']}, B = {latency['batch']}, "
                                   "decode", update, latency["ms_per_token"][label] / 1e3))
    return found


def attention(entry: Mapping) -> str:
    """The attention a Table 6 cell of a check ran: checks from before the cells recorded it ran our blocks."""
    return entry.get("attention", ModelConfig.attention)


def _ended_well(check: Mapping, section: str, fields: Mapping, where: str) -> list[tuple[str, dict]]:
    """The entries of a section of the check that ended well, each with the fields a timing is made of."""
    needed: records.Fields = {"seconds_per_update": (int, float), "job_devices": int, **fields}
    return [(name, records.fields_of(entry, needed, f"{where}: {section}.{name}"))
            for name, entry in check[section].items() if entry.get("ok")]


def printed(timed: list[lm_time.Timed], assumed: costs.Assumption, refitted: lm_time.Speed) -> str:
    """Each timing beside both speeds' predictions, and the keys whose values would change."""
    now = assumed.speed()
    lines = [f"{len(timed)} timings of our code; each predicted by the config's speed and by the refitted one:"]
    for t in timed:
        before, after = now.seconds(t.update), refitted.seconds(t.update)
        lines.append(f"  {t.cell}: {t.seconds:.4g} s measured; config {before:.4g} s (×{before / t.seconds:.2f}), "
                     f"refitted {after:.4g} s (×{after / t.seconds:.2f})")
    lines.append(f"the plan's keys ({assumed.spec_key} and every plan family that shares its serial latency):")
    values = {assumed.efficiency_key: (assumed.efficiency, refitted.efficiency),
              f"{assumed.spec_key}.serial.step_ms": (now.step_s * 1e3, refitted.step_s * 1e3),
              f"{assumed.spec_key}.serial.per_sequence_us": (now.per_sequence_s * 1e6, refitted.per_sequence_s * 1e6)}
    lines += [f"  {key}: {old:.3g} -> {new:.3g}" for key, (old, new) in values.items()]
    return "\n".join(lines)


def attention_choice(check: Mapping, configured: str) -> str:
    """The Transformer's Table 6 cells timed with each attention (`gpu-check --attention`) beside the config's
    (`lm.attention`), and the one to configure where another was faster at every context both ran."""
    seconds: dict[int, dict[str, float]] = {}
    for entry in check["lm_table6"].values():
        if entry.get("ok") and not entry["row"][0]:
            seconds.setdefault(entry["context"], {})[attention(entry)] = entry["seconds_per_update"]
    compared = {context: ways for context, ways in sorted(seconds.items()) if configured in ways and len(ways) > 1}
    lines = [f"the Transformer's attention (lm.attention: {configured}), one GPU's share of a Table 6 update:"]
    if not compared:
        return "\n".join(lines + [f"  no Table 6 cell of the Transformer timed with {configured} and another"])
    for context, ways in compared.items():
        lines.append(f"  C = {context}: " + ", ".join(f"{way} {s:.4g} s (×{ways[configured] / s:.2f})"
                                                     for way, s in sorted(ways.items(), key=lambda item: item[1])))
    faster = set.intersection(*({way for way, s in ways.items() if s < ways[configured]}
                                for ways in compared.values()))
    if faster:
        best = min(faster, key=lambda way: sum(ways[way] for ways in compared.values()))
        lines.append(f"  lm.attention: {configured} -> {best} (then check again: the refit above timed {configured})")
    return "\n".join(lines)
