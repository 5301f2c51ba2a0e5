#!/usr/bin/python3
"""mutate.py - checks that the emulator test catches broken tensor-core kernels.

Opt-in (not part of `make check`; about 4 minutes on 2 cores):
    /usr/bin/python3 tests/emu/mutate.py [NAME...]

Each mutation below is a small, plausible bug planted in a copy of the
kernel family (kernels/attention_tc.cuh, attention_tc.cu, attention_tc_bwd.cu,
searched as one text in that order): a missing barrier, a cp.async wait that waits for too
little, a fragment register swapped, ldmatrix without .trans, a mask off by
one or on the wrong tile, a product skipped that was needed, a row left
unfilled.
For each, the files are made host C++ with gen_kernels.awk, the emulator test
(test_attention_tc_emu.cpp, its quick shapes) is built with $CXX (g++) over
the emulated runtime (build/emu/cuda/cuda_emu.o, or tests/emu/cuda_emu.cpp)
and run: a nonzero exit (a FAIL line or an emulator abort) is "caught". The
unmutated file runs first and must pass. A mutation whose text is no longer
in the file is reported "stale": update it to the kernel's new wording.

Exit status 0 when the control passes and every mutation is caught.
Environment: CXX (g++), NVCC (/usr/local/cuda/bin/nvcc; its ../include holds
the CUDA headers)."""
import os
import subprocess
import sys
import tempfile

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRCS = ["kernels/attention_tc.cuh", "kernels/attention_tc.cu", "kernels/attention_tc_bwd.cu"]
SEP = "\n/*@@ mutate.py: next file @@*/\n"  # joins the family into one text to mutate

# name: (the bug, [(text, replacement, which occurrence counting from 1)])
MUTATIONS = {
    "fwd_no_trailing_sync": (
        "forward: a tile buffer refilled while other warps still read it",
        [("        __syncthreads(); /* this buffer is refilled at kj + 1 */\n", "", 1)]),
    "kv_wait_too_little": (
        "forward, dq: compute on a kv tile whose cp.async has not landed",
        [("tc_cp_async_wait<1>();", "tc_cp_async_wait<2>();", 1)]),
    "kv_no_sync_after_wait": (
        "forward, dq: read a kv tile before the other threads' copies landed",
        [("        tc_cp_async_wait<0>();\n    }\n    __syncthreads();\n",
          "        tc_cp_async_wait<0>();\n    }\n", 1)]),
    "dkv_no_trailing_sync": (
        "dkv: a query tile buffer refilled while other warps still read it",
        [("        __syncthreads(); /* this buffer is refilled at it + 1 */\n", "", 1)]),
    "frag_a_swapped": (
        "A fragment: ldmatrix rows given in the B order, registers a1 and a2 swapped",
        [("tc_ldsm_x4(a, M + (lane & 15) * ld + (lane >> 4) * 8);",
          "tc_ldsm_x4(a, M + ((lane & 7) + (lane >> 4) * 8) * ld + ((lane >> 3) & 1) * 8);", 1)]),
    "frag_b_nk_swapped": (
        "B fragments of two n-tiles (K): rows given in the A order, b[1] and b[2] swapped",
        [("tc_ldsm_x4(b, M + ((lane & 7) + (lane >> 4) * 8) * ld + ((lane >> 3) & 1) * 8);",
          "tc_ldsm_x4(b, M + (lane & 15) * ld + (lane >> 4) * 8);", 1)]),
    "frag_b_kn_no_trans": (
        "B fragments from a row-major K x N tile (V): ldmatrix without .trans",
        [("tc_ldsm_x4_trans(b, M", "tc_ldsm_x4(b, M", 1)]),
    "frag_a_from_c_swapped": (
        "A fragment from C fragments: a1 and a2 swapped",
        [("    a[1] = tc_pack_f32(c0[2], c0[3]);\n    a[2] = tc_pack_f32(c1[0], c1[1]);\n",
          "    a[1] = tc_pack_f32(c1[0], c1[1]);\n    a[2] = tc_pack_f32(c0[2], c0[3]);\n", 1)]),
    "fwd_no_rescale": (
        "forward: O not rescaled when the running max grows",
        [("            o[dt][0] *= al_lo;\n", "", 1)]),
    "dkv_mask_off_by_one": (
        "dkv: the diagonal masked out",
        [("(i < Tq && j_lo <= pos)", "(i < Tq && j_lo < pos)", 1)]),
    "fwd_mask_wrong_tile": (
        "forward: the causal mask applied on the first kv tile instead of the diagonal one",
        [("const bool diag = tc_diag_live(k0, p0, warp, live);",
          "const bool diag = tc_diag_live(k0, p0, warp, live) && kj == 0;", 1)]),
    "dq_mask_wrong_tile": (
        "dq: the causal mask applied on the first kv tile instead of the diagonal one",
        [("const bool diag = tc_diag_live(k0, p0, warp, live);",
          "const bool diag = tc_diag_live(k0, p0, warp, live) && kj == 0;", 2)]),
    "diag_mask_one_tile": (
        "forward, dq: only the kv tile holding the first row's position masked (a chunk at an "
        "offset not a multiple of 64 has two)",
        [("const bool diag = k0 + TC_BC - 1 > p0;", "const bool diag = k0 <= p0 && k0 + TC_BC > p0;", 1)]),
    "diag_skip_own_block": (
        "forward, dq: the diagonal tile's products skipped from the warp's own 16 keys on",
        [("max(0, p0 + 16 * warp + 16 - k0)", "max(0, p0 + 16 * warp - k0)", 1)]),
    "fwd_offset_ignored": (
        "forward: rows at their index, not their position (Tk - Tq + index)",
        [("const int p0 = Tk - Tq + q0;                                /* row q0's position */",
          "const int p0 = q0;", 1)]),
    "fwd_too_few_kv_tiles": (
        "forward: kv tiles walked up to the row index, not its position",
        [("const int nkv = (p0 + min(TC_BR, Tq - q0) - 1) / TC_BC + 1; /* through the last row's keys */",
          "const int nkv = qi + 1;", 1)]),
    "dq_offset_ignored": (
        "dq: rows at their index, not their position",
        [("const int p0 = Tk - Tq + q0; /* as in the forward */", "const int p0 = q0;", 1)]),
    "dkv_offset_ignored": (
        "dkv: queries at their index, not their position",
        [("off = Tk - Tq; /* query r at position off + r */", "off = 0;", 1)]),
    "dkv_first_query_tile": (
        "dkv: query tiles from the key tile's index, not from the first query that sees it",
        [("const int qs = max(0, k0 - off) / BQ", "const int qs = k0 / BQ", 1)]),
    "dkv_mask_first_tile_only": (
        "dkv: only the query tile on the key tile's first row masked (HD 128 has two)",
        [("const bool edge = p0 < k0 + TC_BC ||", "const bool edge = p0 == k0 ||", 1)]),
    "dkv_skip_diagonal_block": (
        "dkv: the products of the warp's diagonal 16-query block skipped",
        [("const int live_lo = dead > 0 ? dead / 16 : 0;",
          "const int live_lo = dead >= 0 ? dead / 16 + 1 : 0;", 1)]),
    "dkv_prefetch_wrong_head": (
        "dkv: the next query tile fetched from the wrong head of the group",
        [("h1 = kh * rep + (it + 1) / per_head", "h1 = kh * rep + it / per_head", 1)]),
    "grad_overwrite_reads": (
        "dq, dk, dv overwritten (acc 0) by an add: the NaN they hold on entry is read",
        [("    else tc_store_bf16x2(p, x, y);", "    else tc_add_bf16x2(p, x, y);", 1)]),
    "tile_rows_past_T_unfilled": (
        "tile load: rows past T left as they were instead of zeroed",
        [("*reinterpret_cast<uint4 *>(d) = make_uint4(0u, 0u, 0u, 0u);", "(void)d;", 1)]),
    "tile_rows_past_Tk": (
        "tile load: kv rows bounded by Tq instead of Tk (a chunk's keys past Tq read as zero)",
        [("tc_tile_load<HD, TC_BC>(Ks, k, b, 0, Tk, NKV, kh);",
          "tc_tile_load<HD, TC_BC>(Ks, k, b, 0, Tq, NKV, kh);", 1)]),
}


def mutate(src, edits):
    """src with the edits applied, or None when a text is not found"""
    for old, new, nth in edits:
        at = -1
        for _ in range(nth):
            at = src.find(old, at + 1)
            if at < 0:
                return None
        src = src[:at] + new + src[at + len(old):]
    return src


def runtime_object(work, cxx, flags):
    """the emulated CUDA runtime: make's object when built, else compiled here once"""
    built = os.path.join(TOP, "build/emu/cuda/cuda_emu.o")
    if os.path.exists(built):
        return built
    obj = os.path.join(work, "cuda_emu.o")
    if not os.path.exists(obj):
        subprocess.run([cxx] + flags + ["-c", "-o", obj, os.path.join(TOP, "tests/emu/cuda_emu.cpp")],
                       check=True)
    return obj


def build_and_run(src, work, name):
    """(caught-or-failed: bool, one-line summary) for the family's joined text src"""
    texts = src.split(SEP)
    if len(texts) != len(SRCS):
        return None, "a mutation crossed a file boundary"
    raw = os.path.join(work, "src")
    os.makedirs(raw, exist_ok=True)
    for path, text in zip(SRCS, texts):
        base = os.path.basename(path)
        cu = os.path.join(raw, base)
        # host C++ beside the test's include path: X.cu -> X.cpp, the header keeps its name
        gen = os.path.join(work, base[:-3] + ".cpp" if base.endswith(".cu") else base)
        with open(cu, "w") as f:
            f.write(text)
        with open(gen, "w") as f:
            subprocess.run(["awk", "-f", os.path.join(TOP, "tests/emu/gen_kernels.awk"), cu],
                           stdout=f, check=True)
    exe = os.path.join(work, "test_" + name)
    nvcc = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
    cxx = os.environ.get("CXX", "g++")
    flags = ["-std=c++17", "-O2", "-ffp-contract=off", "-fno-strict-aliasing", "-Wno-unknown-pragmas",
             "-I" + work, "-I" + os.path.join(TOP, "lib"), "-I" + os.path.join(TOP, "kernels"),
             "-I" + os.path.join(TOP, "tests/emu"),
             "-isystem", os.path.join(os.path.dirname(nvcc), "../include")]
    cc = subprocess.run([cxx] + flags + ["-o", exe, os.path.join(TOP, "tests/emu/test_attention_tc_emu.cpp"),
                                         runtime_object(work, cxx, flags), "-lpthread"],
                        capture_output=True, text=True)
    if cc.returncode != 0:
        return None, "does not compile: " + (cc.stderr.strip().splitlines() or [""])[0]
    env = dict(os.environ)
    env.pop("TITAN_EMU_FULL", None)
    try:
        r = subprocess.run([exe], capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        return True, "timed out"
    out = r.stdout.strip().splitlines()
    fails = [ln for ln in out if ln.startswith("FAIL")]
    err = r.stderr.strip().splitlines()
    why = (fails[0] if fails else err[-1] if err else out[-1] if out else "")[:110]
    return r.returncode != 0, f"exit {r.returncode}: {why}"


def main():
    names = sys.argv[1:] or list(MUTATIONS)
    unknown = [n for n in names if n not in MUTATIONS]
    if unknown:
        print("mutate.py: no mutation named " + ", ".join(unknown), file=sys.stderr)
        print("known: " + " ".join(MUTATIONS), file=sys.stderr)
        return 2
    texts = []
    for path in SRCS:
        with open(os.path.join(TOP, path)) as f:
            texts.append(f.read())
    src = SEP.join(texts)
    SRC = " + ".join(SRCS)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="titan-mutate.") as work:
        failed, what = build_and_run(src, work, "control")
        if failed is not False:
            print(f"FAIL    control (unmutated {SRC}): {what}")
            return 1
        print(f"ok      control passes ({what})")
        for name in names:
            bug, edits = MUTATIONS[name]
            m = mutate(src, edits)
            if m is None:
                print(f"STALE   {name}: its text is not in {SRC}")
                bad += 1
                continue
            caught, what = build_and_run(m, work, name)
            if caught is None:
                print(f"STALE   {name}: {what}")
                bad += 1
            elif caught:
                print(f"caught  {name} ({bug}): {what}")
            else:
                print(f"MISSED  {name} ({bug})")
                bad += 1
            sys.stdout.flush()
    print(f"{len(names) - bad} of {len(names)} mutations caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
