"""Shared builders of the tests: where the repository and the Boxoban files are, how to run the workflow and a
killed-and-resumed training command, and the small datasets and configs that several test modules build."""

import atexit
import contextlib
import copy
import json
import os
import signal
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from parallel_experts.config import files
from parallel_experts.lm.settings import ModelConfig, TrainConfig
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban.settings import REPRESENTATIONS, TARGETS
from parallel_experts.study import Study

REPO = Path(__file__).resolve().parent.parent


def study_of(name: str = "paper.yaml", **domains: dict) -> Study:
    """The study of config/`name`, each domain in `domains` given the keys there (its budgets replaced whole; its
    ablations and probes dropped, which name the file's runs): what reads one part of a config, tested on a whole
    one."""
    config = files.load([REPO / "config" / name])
    for domain, keys in domains.items():
        config[domain] = {key: value for key, value in config[domain].items()
                          if key not in ("ablations", "probes")} | keys
    return Study.of(config)
# The Boxoban files of the team's shared folder, which lies beside the checkout (CI gets a copy there too);
# tests that need them skip where it is missing.
BOXOBAN = REPO.parent / "shared/data/boxoban"
needs_boxoban = pytest.mark.skipif(not (BOXOBAN / "unfiltered/test/000.txt").exists(),
                                   reason=f"needs the Boxoban files at {BOXOBAN}")


def snakemake(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run Snakemake from the repository root as `.venv/bin/snakemake` without an activated venv: jobs
    must still find this interpreter (workflow/rules/common.smk), locally and on SLURM nodes."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=os.environ | {"PATH": path},
                          capture_output=True, text=True, timeout=timeout)


class Cli:
    """`python -m parallel_experts ARGS` as a user runs it, for the tables of bad inputs (test_bad_inputs.py,
    test_config.py): each case runs in one interpreter that stays up between them (cli_server.py, one per test
    worker), which spares a start-up of the library per case. A case that kills that interpreter (a crash) reports
    its status, and the next case starts a new one."""

    def __init__(self):
        self.server = None

    def __call__(self, *args, cwd: Path | None = None, file_size_limit: int | None = None):
        if self.server is None:
            self.server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("cli_server.py"))],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        case = {"args": list(map(str, args)), "cwd": str(cwd or Path.cwd()), "file_size_limit": file_size_limit}
        self.server.stdin.write(json.dumps(case) + "\n")
        self.server.stdin.flush()
        reply = self.server.stdout.readline()
        if not reply:
            status, self.server = self.server.wait(), None
            return subprocess.CompletedProcess(case["args"], status, "", f"the command died with status {status}")
        outcome = json.loads(reply)
        return subprocess.CompletedProcess(case["args"], outcome["status"], outcome["stdout"], outcome["stderr"])

    def close(self):
        if self.server is not None:
            self.server.stdin.close()
            self.server.wait(timeout=60)


cli = Cli()
atexit.register(cli.close)


def planned_jobs(*args, configfile="config/smoke.yaml") -> dict[str, int]:
    """Jobs per rule that a dry run of the smoke DAG (or of the targets among `args`) plans (its "Job stats")."""
    run = snakemake("-n", *args, "--configfile", str(configfile))
    if "Nothing to be done" in run.stdout + run.stderr:
        return {}
    table = run.stdout.split("Job stats:")[1].split("total")[0]
    return {rule: int(count) for rule, count in (line.split() for line in table.splitlines()[3:] if line.strip())}


# Runs the CLI with `save_checkpoint` wrapped so that the process SIGKILLs itself as soon as its first checkpoint
# is on disk: the kill lands at the same point every time, however fast the rest of the run would be (a test that
# polled for the checkpoint from outside once lost that race on a loaded machine and saw the run finish).
DIE_AFTER_FIRST_CHECKPOINT = """
import os, signal, sys
from parallel_experts.core import checkpoint
save = checkpoint.save_checkpoint


def save_and_die(*args, **kwargs):
    save(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
checkpoint.save_checkpoint = save_and_die
from parallel_experts.cli import main
sys.exit(main())
"""


def run_killed_and_resumed(args: list[str], whole: Path, killed: Path, output: str) -> None:
    """Run `python -m parallel_experts *args --run-dir DIR`, a resumable training command, to the end in `whole`;
    in `killed`, SIGKILL it right after its first checkpoint (before `output` exists) and run it again to the
    end. The whole run and the killed one run side by side (each is mostly start-up and compiling)."""
    def start(prefix: list[str], run_dir: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, *prefix, *args, "--run-dir", str(run_dir)], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def finish(process: subprocess.Popen) -> tuple[int, str]:
        output, _ = process.communicate(timeout=600)
        return process.returncode, output

    done, died = start(["-m", "parallel_experts"], whole), start(["-c", DIE_AFTER_FIRST_CHECKPOINT], killed)
    code, log = finish(done)
    assert code == 0, log
    code, log = finish(died)
    assert code == -signal.SIGKILL, log
    assert not (killed / output).exists()
    code, log = finish(start(["-m", "parallel_experts"], killed))
    assert code == 0, log


def demo_with_every_rule(domain: str) -> dict:
    """The demo config whose `domain` ("sokoban" or "lm") aggregation ablation runs all four rules (the demo itself
    runs two, for time)."""
    from parallel_experts.config import files
    from parallel_experts.core.experts import AGGREGATIONS

    demo = files.load([REPO / "config/config.yaml"])
    demo[domain]["ablations"]["aggregation"]["values"] = list(AGGREGATIONS)
    return demo


def write_sokoban_results(folder: Path, runs, score: dict) -> tuple[list[str], list[str]]:
    """A curve.nc and an eval.nc per Sokoban run as its training and evaluation write them, final-five return
    score[run id] + seed at each seed, no level solved; (curve paths, eval paths)."""
    import json

    import numpy as np
    import xarray as xr

    from parallel_experts.results import store

    curves, evals = [], []
    for run in runs:
        seeds = list(run.seeds)
        curve = xr.Dataset({"final_five": ("seed", [score[run.id] + seed for seed in seeds]),
                            "episodic_return": (("seed", "update"), [[score[run.id]]] * len(seeds))},
                           coords={"seed": seeds, "update": [200]},
                           attrs={"run": run.id, "run_config": json.dumps(run.to_dict())})
        solved = np.zeros((len(seeds), 2, 3))
        evaluation = xr.Dataset({name: (("seed", "mode", "level"), solved) for name in
                                 ("solved", "episode_return", "episode_length")},
                                coords={"seed": seeds, "mode": ["greedy", "sampled"], "level": range(3)},
                                attrs={"run": run.id, "levels": "generated"})
        for name, ds, found in (("curve", curve, curves), ("eval", evaluation, evals)):
            path = folder / run.id / f"{name}.nc"
            store.write_netcdf(ds, path)
            found.append(str(path))
    return curves, evals


def independent_shard_bytes(tokens, magic=20240520, version=1, count=None):
    """A modded-nanogpt token shard written with `struct`, independently of the library's writer."""
    count = len(tokens) if count is None else count
    header = struct.pack("<256i", magic, version, count, *([0] * 253))
    return header + struct.pack(f"<{len(tokens)}H", *tokens)


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # Castagnoli, reflected
        table.append(crc)
    return table


CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """The checksum of a TFRecord: CRC-32C, rotated right by 15 bits plus a constant (TensorFlow's record format)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """What TensorBoard shows of the event files in `folder` (one TensorBoard run): {tag: [(step, value)]} in the
    order written. Read independently of the writer: TFRecord framing (length, its checksum, the record, its
    checksum, all checked), the Event protocol buffer, files in name order as TensorBoard reads them, and a
    SessionLog.START event hiding every value written before it at its step or later (TensorBoard's purge)."""
    from tensorboardX.proto.event_pb2 import Event, SessionLog

    shown: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, offset = path.read_bytes(), 0
        while offset < len(data):
            header = data[offset:offset + 8]
            (length,) = struct.unpack("<Q", header)
            record = data[offset + 12:offset + 12 + length]
            checksums = struct.unpack("<2I", data[offset + 8:offset + 12] + data[offset + 12 + length:][:4])
            assert checksums == (masked_crc32c(header), masked_crc32c(record)), f"{path}: bad record at {offset}"
            offset += 16 + length
            event = Event.FromString(record)
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                shown = {tag: [(step, v) for step, v in points if step < event.step] for tag, points in shown.items()}
            for value in event.summary.value:
                shown.setdefault(value.tag, []).append((event.step, value.simple_value))
    return shown


def assert_tensorboard_matches(folder: Path, curve: xr.Dataset, tags: dict[str, str], **select) -> None:
    """The event files of `folder` show each curve.nc variable (`tags`: TensorBoard tag -> variable, at `select`)
    at every update of the curve exactly once, with its value (float32, as TensorBoard keeps it)."""
    shown = tensorboard_scalars(folder)
    for tag, name in tags.items():
        steps, values = zip(*shown[tag])
        assert list(steps) == curve["update"].values.tolist(), tag
        expected = curve[name].sel(**select).values.astype(np.float32)
        np.testing.assert_array_equal(np.array(values, np.float32), expected, err_msg=tag)


SOKOBAN_TAGS = {f"train/{name}": name for name in ("episodic_return", "episodic_length", "solve_fraction", "loss",
                                                    "policy_loss", "value_loss", "entropy")}
LM_TAGS = {"train/loss": "train_loss", "train/ce_loss": "train_ce_loss", "train/learning_rate": "learning_rate"}


# ------------------------------------------------------------------ small runs and datasets of several tests


VOCAB = 64


def shards(count=2, length=2400, seed=0):
    """Token shards with structure to learn: each token is usually the previous one plus one."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        steps = np.where(rng.random(length) < 0.8, 1, rng.integers(0, VOCAB, length))
        out.append((np.cumsum(steps) % VOCAB).astype(np.uint16))
    return out


def model_config(recurrent, **overrides):
    return ModelConfig(1, 2, 16, 2, 1, vocab=VOCAB, recurrent=recurrent, dtype="float32", **overrides)


def train_config(recurrent, **overrides):
    fields = dict(sequence=8 if recurrent else 16, memory=16 if recurrent else 0, batch_tokens=256,
                  microbatch=16, train_tokens=256 * 12, log_every=2, checkpoint_every=4)
    return TrainConfig(**(fields | overrides))


def ablation_data(setting, values, finals, experts=7, other_runs=0):
    """The layout of `sokoban.experiment.collect` for one ablation, plus `other_runs` runs that it does not name
    (another ablation's)."""
    n = len(values) + other_runs
    seeds = max(len(f) for f in finals)
    final = [list(f) + [np.nan] * (seeds - len(f)) for f in finals] + [[1.0] * seeds] * other_runs
    varied = {"aggregation": [v if setting == "aggregation" else "sqrt_sum" for v in values],
              "radius": [v if setting == "radius" else experts // 2 for v in values]}
    runs = [f"run{i}" for i in range(n)]
    return xr.Dataset(
        {"final_five": (("run", "seed"), final)},
        coords={"run": runs, "sweep": ("run", [sokoban_experiment.ABLATION] * n), "recurrent": ("run", [True] * n), "budget": ("run", ["medium"] * n), "depth": ("run", [2] * n),
                "experts": ("run", [experts] * n), "width": ("run", [64] * n),
                "aggregation": ("run", varied["aggregation"] + ["mean"] * other_runs),
                "radius": ("run", varied["radius"] + [experts // 2] * other_runs), "seed": list(range(seeds))},
        attrs={"ablations": json.dumps({setting: runs[:len(values)]})})


STEPS = 12


def probe_recall(state_deep, state_shallow, control=0.1, width=0.02, scored_levels=100):
    """The probes dataset of two recurrent runs (L4, L2) whose agents' state recall follows the given curves, (steps,)
    for one agent per run or (agents, steps), and whose controls sit at `control`; each curve with an interval of ±
    width, scored on `scored_levels` of 100 test levels."""
    deep, shallow = np.atleast_2d(state_deep), np.atleast_2d(state_shallow)
    agents = len(deep)
    recall = np.full((2, agents, len(REPRESENTATIONS), len(TARGETS), STEPS), control)
    recall[0, :, 0], recall[1, :, 0] = deep[:, None], shallow[:, None]
    bounds = np.stack([recall, recall - width, recall + width], axis=-1)
    scores = ("run", "agent", "representation", "target", "step", "estimate")
    return xr.Dataset(
        {"recall": (scores, bounds), "precision": (scores, bounds),
         "episodes": (("run", "agent", "step"), np.full((2, agents, STEPS), 100)),
         "macro_f1": (("run", "agent", "representation", "target"),
                      np.broadcast_to(np.arange(12.0).reshape(2, 1, 3, 2) / 12, (2, agents, 3, 2)))},
        coords={"run": ["deep", "shallow"], "agent": np.arange(agents), "representation": list(REPRESENTATIONS),
                "target": list(TARGETS), "step": np.arange(STEPS), "estimate": ["value", "low", "high"],
                "depth": ("run", [4, 2]), "experts": ("run", [1, 2]), "width": ("run", [8, 8]),
                "recurrent": ("run", [True, True]), "agent_seed": (("run", "agent"), [list(range(agents))] * 2)},
        attrs={"test_levels": 100, "scored_levels": scored_levels})


# Markup a config string might hold, tagged with a marker that cannot occur by chance on a page (not in base64, which
# has no `-`): an element, an image, a link and a style rule. Without a slash, so that it can name a file or folder.
PROBE = '<b title="pe-probe">b<img src="pe-probe.png"><a href="pe-probe.html">a<style>.pe-probe{color:red}'


class LiveMarkup(HTMLParser):
    """The elements of a page that came from PROBE live: an attribute or a <style> holding its marker."""

    def __init__(self):
        super().__init__()
        self.found, self.style, self.text = [], False, []

    def handle_starttag(self, tag, attrs):
        self.style = tag == "style"
        self.found += [f"<{tag} {name}={value!r}>" for name, value in attrs if value and "pe-probe" in value]

    def handle_endtag(self, tag):
        self.style = False

    def handle_data(self, data):
        if self.style and "pe-probe" in data:
            self.found.append(f"<style>{data.strip()[:60]}")
        elif not self.style:
            self.text.append(data)


def live_markup(page: str) -> tuple[list[str], int]:
    """What of PROBE is live on `page`, and how many times the page shows it as text."""
    parser = LiveMarkup()
    parser.feed(page)
    parser.close()
    return parser.found, "".join(parser.text).count(PROBE)


def with_markup_in_every_string(config: dict, folder: Path) -> tuple[dict, int]:
    """`config` run from `folder`, with its corpus local files and an `external` folder whose names hold PROBE
    (created under `folder`), and PROBE added to every other string that the config's checks accept with it (found
    by trying each one: the checks refuse it where a name must match); and the number of strings that hold PROBE."""
    from parallel_experts import study
    from parallel_experts.config.errors import ConfigError
    from parallel_experts.lm import corpus

    config = copy.deepcopy(config)
    texts = folder / f"corpus {PROBE}"
    texts.mkdir(parents=True, exist_ok=True)
    files = []
    for source in corpus.demo_corpus_files()[:2]:
        (texts / f"{PROBE} {source.name}").write_bytes(source.read_bytes())
        files.append(str((texts / f"{PROBE} {source.name}").relative_to(folder)))
    config["lm"]["corpus"] = {"files": files, "format": "text"}
    config["external"] = [str(folder / f"external {PROBE}")]

    def add(node):
        for key, value in list(node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(value, (dict, list)):
                add(value)
            elif isinstance(value, str) and PROBE not in value:
                node[key] = f"{value} {PROBE}"
                try:
                    study.check(config)
                except ConfigError:
                    node[key] = value

    def holding(node) -> int:  # a YAML alias is one object in two places: counted in each
        values = node.values() if isinstance(node, dict) else node if isinstance(node, list) else [node]
        return sum(holding(v) for v in values) if isinstance(node, (dict, list)) else int(PROBE in str(node))

    with contextlib.chdir(folder):
        add(config)
    return config, holding(config)
