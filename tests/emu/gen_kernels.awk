# gen_kernels.awk - a kernels/*.cu file made host C++ for the emulator
# (tests/emu/emu_core.h), on stdout:
#   awk -f tests/emu/gen_kernels.awk kernels/attention_tc.cu > build/emu/kern.inc
#       attention_tc.cu's device code alone (test_attention_tc_emu): the file
#       up to its "host side" section line; fails when that line or the "PTX
#       wrappers" one is missing (the file was reorganised: look here again)
#   awk -v whole=1 -f tests/emu/gen_kernels.awk kernels/X.cu > build/emu/cuda/X.cpp
#       the whole file, host side included, for libtitan-cuda-emu.so
#       (tests/emu/cuda_emu.h, which the output includes first)
# Rewrites, each keeping the line count, so line numbers in compiler messages
# and debuggers are the .cu file's (#line):
#   - the "PTX wrappers" section becomes blank lines (emu_core.h defines them)
#   - `extern __shared__ [__align__(n)] T name[];` -> a T pointer to emu_smem
#   - whole: `kern<...><<<cfg>>>(args` -> `emu_kernel_launch(cfg).run(kern<...>, args`
#     (the kernel name must start its line and <<< ... >>>( share that line)
#   - whole: `#include <cub/...>` -> blank (cuda_emu.h has a host CUB)
#   - whole: `__shared__ T a[..], b[..];` (static) gets
#     `emu_poison_static(&a, sizeof a); ...` appended: NaN at every block
BEGIN {
    if (whole) print "#include \"cuda_emu.h\""
    print "#line 1 \"" ARGV[1] "\""
}
!whole && /^\/\* -+ host side / { host = 1; exit }
/^\/\* -+ / { skip = ($0 ~ / PTX wrappers/); if (skip) ptx = 1 }
skip { print ""; next }
!whole && /^#include "cuda_ops\.cuh"/ { print ""; next }
whole && /^#include <cub\// { print ""; next }
/extern __shared__ / {
    line = $0
    match(line, /^[ \t]*/); indent = substr(line, 1, RLENGTH)
    sub(/^[ \t]*extern __shared__ /, "", line)
    sub(/__align__\([0-9]+\) /, "", line)
    if (!match(line, /[A-Za-z_][A-Za-z0-9_]*\[\];/)) {
        printf "gen_kernels.awk: %s:%d: cannot read this extern __shared__ line\n", ARGV[1], NR > "/dev/stderr"
        exit 1
    }
    name = substr(line, RSTART, RLENGTH - 3); type = substr(line, 1, RSTART - 1)
    sub(/[ \t]+$/, "", type)
    print indent type " *" name " = reinterpret_cast<" type " *>(emu_smem);"
    next
}
# a static __shared__ declaration: NaN-filled at each block's first thread
# to reach it (appended on the same line; the declaration is then static)
whole && /^[ \t]*__shared__ / && !/extern/ {
    line = $0
    sub(/^[ \t]*__shared__ [A-Za-z_][A-Za-z0-9_]* /, "", line)
    sub(/;.*$/, "", line)
    n = split(line, decl, ",")
    poison = ""
    for (i = 1; i <= n; i++) {
        d = decl[i]
        sub(/^[ \t]*/, "", d)
        if (d !~ /^[A-Za-z_]/) continue # a comma inside brackets: not a name
        match(d, /^[A-Za-z_][A-Za-z0-9_]*/)
        nm = substr(d, 1, RLENGTH)
        poison = poison " emu_poison_static(&" nm ", sizeof " nm ");"
    }
    print $0 poison
    next
}
whole && /<<<.*>>>\(/ {
    line = $0
    match(line, /^[ \t]*/); indent = substr(line, 1, RLENGTH)
    p = index(line, "<<<"); q = index(line, ">>>(")
    name = substr(line, RLENGTH + 1, p - RLENGTH - 1)
    cfg = substr(line, p + 3, q - p - 3)
    rest = substr(line, q + 4)
    print indent "emu_kernel_launch(" cfg ").run(" name (rest ~ /^\)/ ? "" : ", ") rest
    next
}
whole && /<<</ {
    printf "gen_kernels.awk: %s:%d: a launch the generator cannot read (kernel name first, <<< ... >>>( on one line)\n", ARGV[1], NR > "/dev/stderr"
    exit 1
}
{ print }
END {
    if (!whole && (!ptx || !host)) {
        printf "gen_kernels.awk: %s: no \"%s\" section line\n", ARGV[1],
            (!ptx ? "PTX wrappers" : "host side") > "/dev/stderr"
        exit 1
    }
}
