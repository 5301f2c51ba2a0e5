# gen_kernels.awk - a CUDA source file (kernels/*.cu, tests/emu/*.cu) made
# host C++ for the emulator, on stdout:
#   awk -f tests/emu/gen_kernels.awk kernels/X.cu > build/emu/cuda/X.cpp
# The output includes tests/emu/cuda_emu.h first. Rewrites, each keeping the
# line count, so line numbers in compiler messages and debuggers are the .cu
# file's (#line):
#   - a "PTX wrappers" section becomes blank lines (emu_core.h defines them)
#   - `extern __shared__ [__align__(n)] T name[];` -> a T pointer to emu_smem
#   - `kern<...><<<cfg>>>(args` -> `emu_kernel_launch(cfg).run(kern<...>, args`
#     (the kernel name must start its line and <<< ... >>>( share that line)
#   - `#include <cub/...>` -> blank (cuda_emu.h has a host CUB)
#   - `__shared__ T a[..], b[..];` (static) gets
#     `emu_poison_static(&a, sizeof a); ...` appended: NaN at every block
BEGIN {
    print "#include \"cuda_emu.h\""
    print "#line 1 \"" ARGV[1] "\""
}
/^\/\* -+ / { skip = ($0 ~ / PTX wrappers/) }
skip { print ""; next }
/^#include <cub\// { print ""; next }
/^[ \t]*extern __shared__ / {
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
/^[ \t]*__shared__ / && !/extern/ {
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
/<<<.*>>>\(/ {
    line = $0
    match(line, /^[ \t]*/); indent = substr(line, 1, RLENGTH)
    p = index(line, "<<<"); q = index(line, ">>>(")
    name = substr(line, RLENGTH + 1, p - RLENGTH - 1)
    cfg = substr(line, p + 3, q - p - 3)
    rest = substr(line, q + 4)
    print indent "emu_kernel_launch(" cfg ").run(" name (rest ~ /^\)/ ? "" : ", ") rest
    next
}
/<<</ {
    printf "gen_kernels.awk: %s:%d: a launch the generator cannot read (kernel name first, <<< ... >>>( on one line)\n", ARGV[1], NR > "/dev/stderr"
    exit 1
}
{ print }
