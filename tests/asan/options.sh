# options.sh - sourced by scripts/run-tests.sh --asan (make check-asan): the
# sanitizers' run-time options for the binaries of build-asan/ and bin-asan/.
#   exitcode=86          a report never passes for an expected exit status
#                        (1 is titan-ckpt diff's and titan-trace hang's result)
#   log_path             reports go to $build/asan-logs/ (not to stderr):
#                        run-tests.sh fails the test that left one and shows
#                        it, even where the test discarded a command's stderr
#   allocator_may_return_null=1
#                        a request beyond ASan's limit returns NULL, as libc's
#                        malloc does, so titan's own out-of-memory path (exit
#                        6) is what runs, not an ASan abort
#   detect_leaks=1       LeakSanitizer at exit, with tests/asan/lsan.supp
#                        (each entry says why)
# halt_on_error is implied by -fno-sanitize-recover=all (Makefile ASAN_FLAGS).
asan_logs=$top/$build/asan-logs
rm -rf "$asan_logs"; mkdir -p "$asan_logs"
ASAN_OPTIONS="exitcode=86:log_path=$asan_logs/asan:detect_leaks=1:allocator_may_return_null=1"
ASAN_OPTIONS="$ASAN_OPTIONS:abort_on_error=0:print_summary=1"
UBSAN_OPTIONS="exitcode=86:log_path=$asan_logs/ubsan:print_stacktrace=1:halt_on_error=1"
LSAN_OPTIONS="exitcode=86:suppressions=$top/tests/asan/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
