#!/usr/bin/env bash
# Install Debian's SLURM (slurm-wlm: slurmctld, slurmd, client tools) and munge,
# so that the tests marked `slurm` can start a real single-node cluster
# (see tests/slurm_cluster.py). Idempotent: does nothing when the binaries are
# already there. Always exits 0: a machine where this cannot work (not root, no
# apt-get) simply gets those tests skipped, with the reason pytest prints.
# Prints one line saying what it did.
set -u

needed="slurmctld slurmd munged sbatch squeue sinfo scontrol"
missing=""
for b in $needed; do
    # The daemons live in /usr/sbin, which is not on every user's PATH.
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing="$missing $b"
done

if [ -z "$missing" ]; then
    echo "install_slurm: slurm and munge already installed, nothing to do"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install_slurm: missing:$missing; not installing (needs root and apt-get); slurm tests will skip"
    exit 0
fi

start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
# The packages' postinst scripts try to start services; without systemd that
# only prints warnings, and tests/slurm_cluster.py starts the daemons itself.
if apt-get update -qq >/dev/null 2>&1 &&
   apt-get install -y -qq --no-install-recommends slurm-wlm munge >/tmp/install_slurm.log 2>&1; then
    echo "install_slurm: installed slurm-wlm and munge (missing before:$missing) in $(( $(date +%s) - start )) s"
else
    echo "install_slurm: apt-get failed (see /tmp/install_slurm.log); slurm tests will skip"
fi
exit 0
