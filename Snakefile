"""Temporal Recurrence Favors Fewer Layers (arXiv 2609.12531): every data figure and table from one command.

snakemake --cores all                                                  demo scale, offline, CPU
snakemake --cores all --profile slurm --configfile config/paper.yaml   paper scale on a SLURM cluster
snakemake --cores all allocations                                      one report (see README)
"""

from snakemake.utils import min_version

min_version("9.27")


# The demo config is the default; a --configfile given on the command line replaces it instead of being
# merged into it (Snakemake merges nested keys, which would mix the demo's and the paper's grids).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/allocations.smk"
include: "workflow/rules/sokoban.smk"
include: "workflow/rules/probes.smk"
include: "workflow/rules/lm.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/reports.smk"
include: "workflow/rules/rehearsal.smk"


localrules:
    all,
    config_snapshot,


onstart:
    # A real run claims results/config.json for its config (a dry run never gets here): refused where a running
    # workflow reads another config from it; a lock or snapshot that cannot be used (a folder, a link, read-only) is
    # named in one line.
    try:
        snapshot.claim(STUDY.config, CONFIG_JSON, config_files())
    except (snapshot.FolderBusy, PipelineError) as error:
        sys.exit(f"error: {error}")


rule all:
    """Every report of the paper known to the pipeline, and the index that links them."""
    default_target: True
    input:
        "reports/index.html",


rule config_snapshot:
    """The config snapshot in a new folder, where the DAG needs it before the onstart hook has written it."""
    output:
        CONFIG_JSON,
    log:
        paths.log("config_snapshot"),
    run:
        Path(log[0]).write_text(snapshot.write(STUDY.config, output[0]))
