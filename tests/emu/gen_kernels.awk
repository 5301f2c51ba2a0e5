# gen_kernels.awk - kernels/attention_tc.cu's device code for the host
# emulator (tests/emu/emu.h), on stdout:
#   awk -f tests/emu/gen_kernels.awk kernels/attention_tc.cu > build/emu/kern.inc
# Keeps everything up to the "host side" section line except the
# '#include "cuda_ops.cuh"' line and the "PTX wrappers" section (emu.h
# defines those functions); both become blank lines, so line numbers in
# compiler messages and debuggers are the .cu file's. Fails when either
# section line is missing (the file was reorganised: look here again).
BEGIN { print "#line 1 \"" ARGV[1] "\"" }
/^\/\* -+ host side / { host = 1; exit }
/^\/\* -+ / { skip = ($0 ~ / PTX wrappers/); if (skip) ptx = 1 }
/^#include "cuda_ops\.cuh"/ { print ""; next }
{ print (skip ? "" : $0) }
END {
    if (!ptx || !host) {
        printf "gen_kernels.awk: %s: no \"%s\" section line\n", ARGV[1],
            (!ptx ? "PTX wrappers" : "host side") > "/dev/stderr"
        exit 1
    }
}
