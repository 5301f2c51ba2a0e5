#!/bin/sh
# Installs what titan builds and tests with: Debian 12 packages, the demo
# corpus (scripts/corpus.sh: Debian's man-pages, rendered to text) and the
# pinned Python references of the tests (scripts/pyenv.sh: build/venv from
# PyPI). Safe to run again: it installs only what is missing.
#   TITAN_NO_PYREF=1   leave out the Python references (~2.7 GB of wheels; titan needs
#                      none of it, only its tests and benchmarks do)
# slurm-wlm and munge: tests/cli/dist_slurm.sh runs srun --mpi=pmix on a
# one-node Slurm (scripts/slurm-local.sh); its pmix plugin loads libpmix-dev's libpmix.so.
# libopenmpi-dev: mpicc and mpi.h, which build libtitan-mpi.so (the mpi
# communicator: jobs across hosts; tests/cli/dist_2node.sh).
# liblapacke-dev: LAPACK's headers (lapack.h; the routines come from OpenBLAS)
# for GaLore's SVD (lib/optim/svd.c).
set -eu
PKGS="build-essential pkg-config libopenblas-dev libopenblas-openmp-dev libzstd-dev
libarchive-dev libjansson-dev libxxhash-dev libpcre2-dev libpmix-dev zstd python3 python3-venv
groff-base openmpi-bin libopenmpi-dev slurm-wlm munge liblapacke-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "install-deps: installing:$missing" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/corpus.sh"
[ "${TITAN_NO_PYREF:-0}" = 1 ] || "$top/scripts/pyenv.sh" >/dev/null
echo "install-deps: ok" >&2
