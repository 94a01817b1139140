# Reports: one papermill notebook per paper figure or table, rendered to code-free HTML; the index; and one
# named target per paper item (`snakemake fig2`), all from the config's catalogue (REPORTS).


localrules:
    index,


for target, names in catalogue.targets(REPORTS.values()).items():

    rule:
        name:
            target
        input:
            [f"reports/{name}.html" for name in names],
        localrule: True


rule plan_costs:
    """What every target of this config costs (python -m parallel_experts plan), written once every result the
    claims page reads exists, so that every timed job's benchmark file is there to compare."""
    input:
        config=CONFIG_JSON,
        after=list(REPORTS["claims"].inputs.values()),
        # the rehearsal's predicted memory, where `snakemake rehearsal` has run (opt-in): a newer one replans
        rehearsed=lambda wildcards: [path for path in [paths.rehearsal(STUDY.scale)] if Path(path).exists()],
    output:
        [f"{paths.PLAN}/{name}.csv" for name in plan.FILES],
    log:
        paths.log("plan"),
    conda:
        CONDA_ENV
    threads: threads("plan_costs")
    resources:
        **resources("plan_costs"),
    params:
        folder=lambda wildcards, output: Path(output[0]).parent,
        config=CONFIG_DIGEST,
    shell:
        "python -m parallel_experts plan --configfile {input.config:q} --out {params.folder:q} > {log:q} 2>&1"


rule paper_plan:
    """What every target of config/paper.yaml costs, beside this config's plan on the plan page. It reads nothing this
    config makes, so it starts beside the first training job, as the power analysis does: in the plan's job after
    every result, it kept half the machine idle at the end of the demo."""
    input:
        paper=Path(workflow.basedir) / "config" / "paper.yaml",
        rehearsed=lambda wildcards: [path for path in [paths.rehearsal("paper")] if Path(path).exists()],
    output:
        [f"{paths.PAPER_PLAN}/{name}.csv" for name in plan.FILES],
    log:
        paths.log("paper_plan"),
    priority: 3
    conda:
        CONDA_ENV
    threads: threads("plan_costs")
    resources:
        **resources("plan_costs"),
    params:
        folder=lambda wildcards, output: Path(output[0]).parent,
    shell:
        "python -m parallel_experts plan --configfile {input.paper:q} --out {params.folder:q} > {log:q} 2>&1"


rule power_analysis:
    """What deciding each claim costs (python -m parallel_experts power) at this config and at the paper's: power
    per design from the authors' numbers and the config's assumptions, priced by the planner."""
    input:
        config=CONFIG_JSON,
    output:
        here=paths.POWER,
        there=paths.PAPER_POWER,
    log:
        paths.log("power"),
    # It needs only the config, so it starts beside the first training job: last in line, it ran alone on one core
    # at the end of the demo for 1.5 minutes before Tables 5 and 6 could take both.
    priority: 3
    conda:
        CONDA_ENV
    threads: threads("power_analysis")
    resources:
        **resources("power_analysis"),
    params:
        paper=str(Path(workflow.basedir) / "config" / "paper.yaml"),
        config=CONFIG_DIGEST,
        # The config's draws hold for the paper's analysis too (the smoke config's few, to check the workflow quickly).
        draws=" ".join(f"--draws {n}" for n in [config.get("power", {}).get("draws")] if n),
    shell:
        "python -m parallel_experts power --configfile {input.config:q} --out {output.here:q} > {log:q} 2>&1 && "
        "python -m parallel_experts power --configfile {params.paper:q} {params.draws} --out {output.there:q} "
        ">> {log:q} 2>&1"


# One rule per report (report_<name>) rather than one rule with a wildcard: Snakemake refuses a wildcard value that
# ends in a piece repeated 20 times or more (PeriodicWildcardError), which a Sokoban page named after a budget
# such as xxxxxxxxxxxxxxxxxxxx would be. Every value reaches a rule as given (`verbatim`), never as a string that
# Snakemake would format.
for name, entry in REPORTS.items():

    rule:
        name:
            f"report_{name}"
        input:
            **report_inputs(entry),
        output:
            html=report(f"reports/{name}.html", caption="../report/report.rst", category="Reports"),
            executed=f"{paths.REPORTS}/{name}.ipynb",
            meta=f"{paths.REPORTS}/{name}.json",
        log:
            paths.log(f"reports/{name}"),
        conda:
            CONDA_ENV
        threads: threads("report")
        resources:
            **resources("report"),
        params:
            name=verbatim(entry.name),
            paper=verbatim(entry.paper),
            notebook_name=verbatim(entry.notebook),
            caption=verbatim(entry.caption),
            notebook=lambda wildcards, input, entry=entry: notebook_parameters(entry, input),
            config_files=verbatim(config_files()),
            config=CONFIG_DIGEST,
        shell:
            "python -m parallel_experts report --config {input.config:q} --notebook {input.notebook:q} "
            "--html {output.html:q} --executed {output.executed:q} --meta {output.meta:q} --paper {params.paper:q} "
            "--config-files {params.config_files:q} --param {params.notebook:q} > {log:q} 2>&1"


rule index:
    """reports/index.html: every paper item with its target and report (the config and date that rendered it), or
    why it is missing."""
    input:
        config=CONFIG_JSON,
        meta=[f"{paths.REPORTS}/{report}.json" for report in REPORTS],
        html=expand("reports/{report}.html", report=REPORTS),
    output:
        "reports/index.html",
    log:
        paths.log("reports/index"),
    conda:
        CONDA_ENV
    params:
        config=CONFIG_DIGEST,
    shell:
        "python -m parallel_experts index --config {input.config:q} --out {output:q} {input.meta:q} > {log:q} 2>&1"
