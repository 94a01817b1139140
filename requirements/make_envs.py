"""Write envs/{cpu,cuda}.yaml (conda environments for `snakemake --sdm conda`) from the pip lock files
(requirements/{cpu,cuda}.txt, plus requirements/corpus.txt).

Run by `make lock` after `uv pip compile`; tests/test_environment.py checks that the two stay in step.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9_.\[\]-]+==[^\s;\\]+)")


def pins(lock: Path) -> list[str]:
    return [m.group(1) for line in lock.read_text().splitlines() if (m := PIN.match(line))]


def main() -> None:
    for variant in ("cpu", "cuda"):
        lines = [
            f"# Generated from requirements/{variant}.txt by requirements/make_envs.py (make lock); do not edit.",
            f"name: parallel-experts-{variant}",
            "channels: [conda-forge]",
            "dependencies:",
            "  - python=3.11",
            "  - pip",
            "  - pip:",
            *(f"      - {pin}" for pin in pins(ROOT / "requirements" / f"{variant}.txt")),
            # The demo corpus; pip inside conda cannot skip its (unused) GUI dependencies, so they come along.
            *(f"      - {pin}" for pin in pins(ROOT / "requirements" / "corpus.txt")),
        ]
        (ROOT / "envs" / f"{variant}.yaml").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
