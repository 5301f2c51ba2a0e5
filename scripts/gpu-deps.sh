#!/bin/sh
# gpu-deps.sh - titan's C build dependencies for a machine that has CUDA but
# neither these libraries nor a package registry (the lent GPU machines):
#
#   scripts/gpu-deps.sh fetch    here, where apt works: downloads Debian's
#                                .deb files into .gpu-deps/ (ignored by git;
#                                carry it to the GPU machine, ~15 MB)
#   . scripts/gpu-deps.sh use    there (bash; in dash, whose "." takes no
#                                arguments: set -- use; . scripts/gpu-deps.sh):
#                                unpacks them into build/gpu-deps
#                                (dpkg -x, nothing installed system-wide)
#                                and exports CPATH, LIBRARY_PATH,
#                                LD_LIBRARY_PATH and TITAN_MAKE_VARS (the
#                                OpenBLAS paths to pass to make)
#
# The runtime libraries come along as well as the headers: libraries built
# for Debian 12's glibc 2.36 run on a newer glibc.
PKGS="libzstd-dev libzstd1 libarchive-dev libarchive13 libjansson-dev libjansson4
 libxxhash-dev libxxhash0 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
 libopenblas-openmp-dev libopenblas0-openmp libgfortran5 libquadmath0
 libxml2 libicu72 libnettle8 liblz4-1 liblzma5 libacl1 libbz2-1.0"

gpu_deps_top=$(cd "$(dirname "${0:-.}")/.." 2>/dev/null && pwd)
[ -f "$gpu_deps_top/Makefile" ] || gpu_deps_top=$(pwd)

case "${1:-}" in
fetch)
    mkdir -p "$gpu_deps_top/.gpu-deps" || exit 1
    cd "$gpu_deps_top/.gpu-deps" || exit 1
    # shellcheck disable=SC2086
    apt-get download $PKGS || { echo "gpu-deps: apt-get download failed (apt-get update first?)" >&2; exit 1; }
    echo "gpu-deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in $(pwd)"
    ;;
use)
    d=$gpu_deps_top/build/gpu-deps
    if ! ls "$gpu_deps_top"/.gpu-deps/*.deb >/dev/null 2>&1; then
        echo "gpu-deps: no .gpu-deps/*.deb (run scripts/gpu-deps.sh fetch where apt works, and carry .gpu-deps)" >&2
        return 1 2>/dev/null || exit 1
    fi
    mkdir -p "$d"
    for f in "$gpu_deps_top"/.gpu-deps/*.deb; do dpkg -x "$f" "$d" || echo "gpu-deps: cannot unpack $f" >&2; done
    lib=$d/usr/lib/x86_64-linux-gnu
    export CPATH="$d/usr/include:$d/usr/include/x86_64-linux-gnu:$d/usr/include/x86_64-linux-gnu/openblas-openmp${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$lib:$lib/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export TITAN_MAKE_VARS="BLAS_OMP_DIR=$lib/openblas-openmp BLAS_OMP_INC=$d/usr/include/x86_64-linux-gnu/openblas-openmp"
    ;;
*)
    echo "usage: scripts/gpu-deps.sh fetch | . scripts/gpu-deps.sh use" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
