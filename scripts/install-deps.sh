#!/bin/sh
# Installs what titan builds and tests with, from Debian 12 packages (and the
# demo corpus from npm). Safe to run again: it installs only what is missing.
# slurm-wlm and munge: tests/cli/dist_slurm.sh runs srun --mpi=pmix on a
# one-node Slurm (scripts/slurm-local.sh); its pmix plugin loads libpmix-dev's libpmix.so.
set -eu
PKGS="build-essential pkg-config libopenblas-dev libopenblas-openmp-dev libzstd-dev
libarchive-dev libjansson-dev libxxhash-dev libpcre2-dev libpmix-dev zstd python3 python3-torch
python3-numpy openmpi-bin slurm-wlm munge"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# npm: the machine's own Node.js install if it has one (Debian's npm conflicts with it).
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "install-deps: installing:$missing" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
fi
# The demo corpus: a pinned npm package, kept as its .tgz (titan-shard reads it directly).
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$top/.deps"
if [ ! -s "$top/.deps/nlp-corpus-4.4.0.tgz" ]; then
    (cd "$top/.deps" && npm pack --silent nlp-corpus@4.4.0 >/dev/null)
fi
# The same bytes on every machine: the registry's published sha1 of 4.4.0.
echo "5a43e1851f3b1c4549d81fbe0a68129c8beed650  $top/.deps/nlp-corpus-4.4.0.tgz" | sha1sum -c --quiet - >&2 || {
    echo "install-deps: nlp-corpus-4.4.0.tgz does not match its published checksum" >&2; exit 1; }
echo "install-deps: ok" >&2
