/* test_fp8_emu.cpp - kernels/fp8.cu's transposed and two-layout casts on
 * the CUDA emulator, byte for byte against the codec run on the host.
 *
 * test_cuda_ops holds the backend's straight casts and scales to the CPU
 * backend's bits, but the transposed casts (each GEMM's operand with its
 * contraction dimension contiguous) reach it only through the float8
 * products, within a GEMM's tolerance. Here every code of
 *   - titan_cuda_fp8_cast, transposed: the 64 x 64 tile kernel where the
 *     shape allows, the 32 x 32 element-wise one otherwise and under
 *     titan_cuda_fp8_set_simple(1);
 *   - titan_cuda_fp8_cast_both (dy's two tensorwise layouts, one read):
 *     the straight codes, the transposed codes and both scales;
 * must equal encode(x * scale) computed here with tensor/fp8.h's codec
 * from the scale the device computed (its bits are test_cuda_ops'), for
 * fp32 and bf16 sources, whole and ragged tiles, shapes the tiles refuse,
 * an unaligned source, and values that saturate, underflow or are NaN.
 *
 * The whole file is included as gen_kernels.awk makes it (build/emu/cuda/),
 * so the launches, grids and scratch are the backend's own on emulated
 * device memory. One line per case; exit 0 when all pass. */
#include "fp8.cpp" /* build/emu/cuda/, from kernels/fp8.cu */
#include "../gpu/cuda_standins.h"

#include <vector>

/* cuda_backend.cu's, which this program does not link */
void titan_cuda_bad_dtype(const char *file, int line, const char *op, titan_dtype dt) {
    fprintf(stderr, "titan: cuda: %s:%d: %s: dtype %d\n", file, line, op, (int)dt);
    abort();
}

static int failed, cases;

/* x [rows, cols] as fp32 values a bf16 holds exactly (so both sources
 * carry the same numbers), spread over 24 binades; a NaN when asked. A
 * cast from x's own amax never saturates: the given amaxes in main make
 * codes saturate and underflow. */
static std::vector<float> values(int rows, int cols, unsigned seed, bool nan) {
    std::vector<float> x((size_t)rows * cols);
    uint32_t h = seed * 2654435761u + 1;
    for (size_t i = 0; i < x.size(); i++) {
        h ^= h << 13, h ^= h >> 17, h ^= h << 5;
        float m = (float)(h & 0xffff) / 65536.0f - 0.5f;
        float v = ldexpf(m, (int)(h >> 16) % 24 - 12);
        x[i] = __bfloat162float(__float2bfloat16_rn(v));
    }
    if (nan && !x.empty()) x[x.size() / 2] = NAN;
    return x;
}

/* a device copy of x in the source type, offset elements into its buffer */
static void *upload(titan_dtype dt, const std::vector<float> &x, int offset, void **base) {
    size_t es = dt == TITAN_DTYPE_BF16 ? 2 : 4, n = x.size() + (size_t)offset;
    std::vector<unsigned char> h(n * es);
    for (size_t i = 0; i < x.size(); i++) {
        if (dt == TITAN_DTYPE_BF16) {
            bf16 b = __float2bfloat16_rn(x[i]);
            memcpy(&h[(i + offset) * es], &b, es);
        } else {
            memcpy(&h[(i + offset) * es], &x[i], es);
        }
    }
    CUDA_CHECK(cudaMalloc(base, n * es));
    CUDA_CHECK(cudaMemcpy(*base, h.data(), n * es, cudaMemcpyHostToDevice));
    return (unsigned char *)*base + (size_t)offset * es;
}

static std::vector<uint8_t> codes_of(const titan_cuda_fp8_operand &o) {
    std::vector<uint8_t> q((size_t)o.rows * o.cols);
    if (!q.empty()) CUDA_CHECK(cudaMemcpy(q.data(), o.q, q.size(), cudaMemcpyDeviceToHost));
    return q;
}

static std::vector<float> scales_of(const titan_cuda_fp8_operand &o, int ns) {
    std::vector<float> s((size_t)ns * 2);
    CUDA_CHECK(cudaMemcpy(s.data(), o.scale, (size_t)ns * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(s.data() + ns, o.inv, (size_t)ns * sizeof(float), cudaMemcpyDeviceToHost));
    return s;
}

/* q (transposed: [cols, rows]) against encode(x * scale) on the host;
 * the count of codes that differ */
static size_t wrong_codes(const std::vector<uint8_t> &q, const std::vector<float> &x, const std::vector<float> &scale,
                          int rows, int cols, titan_fp8_axis axis, titan_fp8_format f, int transposed) {
    titan_fp8_info fi = titan_fp8_info_of(f);
    size_t bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            float s = scale[axis == TITAN_FP8_ROWS ? r : axis == TITAN_FP8_COLS ? c : 0];
            uint8_t want = titan_fp8_encode_with(x[(size_t)r * cols + c] * s, fi);
            uint8_t got = q[transposed ? (size_t)c * rows + r : (size_t)r * cols + c];
            bad += want != got;
        }
    return bad;
}

static void report(bool ok, const char *what) {
    cases++;
    failed += !ok;
    printf("%s  %s\n", ok ? "ok  " : "FAIL", what);
}

static const char *fmt_name(titan_fp8_format f) { return f == TITAN_FP8_E5M2 ? "e5m2" : "e4m3"; }

static const char *axis_name(titan_fp8_axis a) {
    return a == TITAN_FP8_TENSOR ? "tensor" : a == TITAN_FP8_ROWS ? "rows" : "cols";
}

/* the transposed cast under both kernels, and (tensorwise) the two-layout
 * cast, of one x */
static void check_shape(titan_dtype dt, int rows, int cols, int offset, titan_fp8_format f, bool nan,
                        const float *given_amax_host, const char *note, bool tiled) {
    std::vector<float> x = values(rows, cols, (unsigned)(rows * 131 + cols), nan);
    void *base = nullptr;
    const void *dx = upload(dt, x, offset, &base);
    char name[256];
    /* the kernel the case is for: the tiles where the shape and x allow
     * (the outputs are the pool's, 256-byte aligned) */
    titan_cuda_fp8_set_simple(0);
    uint8_t *aligned = reinterpret_cast<uint8_t *>(256);
    bool fits = dt == TITAN_DTYPE_BF16 ? tiles_fit<bf16>(aligned, aligned, (const bf16 *)dx, rows, cols)
                                       : tiles_fit<float>(aligned, aligned, (const float *)dx, rows, cols);
    snprintf(name, sizeof name, "%s %dx%d%s: the %s kernel runs", dt == TITAN_DTYPE_BF16 ? "bf16" : "f32", rows, cols,
             note, tiled ? "tiled" : "element-wise");
    report(fits == tiled, name);
    float *d_amax = nullptr;
    if (given_amax_host) {
        CUDA_CHECK(cudaMalloc(&d_amax, sizeof(float)));
        CUDA_CHECK(cudaMemcpy(d_amax, given_amax_host, sizeof(float), cudaMemcpyHostToDevice));
    }
    const char *tn = dt == TITAN_DTYPE_BF16 ? "bf16" : "f32";
    for (int a = 0; a < 3; a++) {
        titan_fp8_axis axis = (titan_fp8_axis)a;
        if (d_amax && axis != TITAN_FP8_TENSOR) continue;
        int ns = titan_cuda_fp8_nscales(axis, rows, cols), pow2 = axis != TITAN_FP8_TENSOR;
        for (int simple = 0; simple <= 1; simple++) {
            titan_cuda_fp8_set_simple(simple);
            titan_cuda_fp8_operand o;
            titan_cuda_fp8_cast(&o, dt, dx, rows, cols, axis, f, pow2, 1, d_amax);
            std::vector<float> s = scales_of(o, ns);
            size_t bad = wrong_codes(codes_of(o), x, s, rows, cols, axis, f, 1);
            bool shape_ok = o.rows == cols && o.cols == rows;
            titan_cuda_fp8_release(&o);
            snprintf(name, sizeof name, "cast^T %s %dx%d %s %s, %s kernel%s: %zu wrong codes", tn, rows, cols,
                     axis_name(axis), fmt_name(f), simple ? "element-wise" : "tiled", note, bad);
            report(bad == 0 && shape_ok, name);
        }
    }
    for (int simple = 0; simple <= 1; simple++) {
        titan_cuda_fp8_set_simple(simple);
        titan_cuda_fp8_operand o, ot;
        titan_cuda_fp8_cast_both(&o, &ot, dt, dx, rows, cols, f, 0, d_amax);
        std::vector<float> s = scales_of(o, 1), st = scales_of(ot, 1);
        size_t bad = wrong_codes(codes_of(o), x, s, rows, cols, TITAN_FP8_TENSOR, f, 0) +
                     wrong_codes(codes_of(ot), x, s, rows, cols, TITAN_FP8_TENSOR, f, 1);
        bool same_scale = memcmp(s.data(), st.data(), 2 * sizeof(float)) == 0;
        /* the scale a lone cast computes: the same bits */
        titan_cuda_fp8_operand lone;
        titan_cuda_fp8_cast(&lone, dt, dx, rows, cols, TITAN_FP8_TENSOR, f, 0, 0, d_amax);
        std::vector<float> sl = scales_of(lone, 1);
        same_scale = same_scale && memcmp(s.data(), sl.data(), 2 * sizeof(float)) == 0;
        bool shapes = o.rows == rows && o.cols == cols && ot.rows == cols && ot.cols == rows && !o.rowwise &&
                      !ot.rowwise;
        titan_cuda_fp8_release(&lone);
        titan_cuda_fp8_release(&o);
        titan_cuda_fp8_release(&ot);
        snprintf(name, sizeof name, "cast both %s %dx%d %s, %s%s: %zu wrong codes%s", tn, rows, cols,
                 fmt_name(f), simple ? "a cast each" : "one pass", note, bad,
                 same_scale ? "" : ", scales differ");
        report(bad == 0 && same_scale && shapes, name);
    }
    titan_cuda_fp8_set_simple(0);
    if (d_amax) CUDA_CHECK(cudaFree(d_amax));
    CUDA_CHECK(cudaFree(base));
}

/* fp8_encode.cuh's pair encode (here cuda_fp8.h's host model of the
 * conversion instruction; every pattern runs on a GPU in
 * tests/gpu/fp8_speed_check.cu) against the codec, in format f: every
 * sign, exponent and top 7 mantissa bits, with low bits that make ties,
 * sticky bits and NaN payloads; each as a pair's first element and its
 * complement as the second */
static void check_encode(titan_fp8_format f) {
    static const uint32_t LOW[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0x5555};
    titan_fp8_info fi = titan_fp8_info_of(f);
    size_t bad = 0, n = 0;
    for (uint32_t hi = 0; hi < 0x10000; hi++) {
        for (uint32_t lo : LOW) {
            uint32_t b = hi << 16 | lo, nb = ~b;
            float x, y;
            memcpy(&x, &b, 4);
            memcpy(&y, &nb, 4);
            uint16_t two = titan_cuda_fp8_encode2(x, y, f);
            bad += (two & 0xff) != titan_fp8_encode_with(x, fi);
            bad += (two >> 8) != titan_fp8_encode_with(y, fi);
            n += 2;
        }
    }
    char name[160];
    snprintf(name, sizeof name, "encode %s: the conversion's pair codes = the codec's, %zu patterns (%zu differ)",
             f == TITAN_FP8_E5M2 ? "e5m2" : "e4m3fn", n, bad);
    report(bad == 0, name);
}

int main(void) {
    check_encode(TITAN_FP8_E4M3);
    check_encode(TITAN_FP8_E5M2);
    const titan_dtype dts[] = {TITAN_DTYPE_F32, TITAN_DTYPE_BF16};
    for (titan_dtype dt : dts) {
        check_shape(dt, 64, 64, 0, TITAN_FP8_E4M3, false, nullptr, " (one whole tile)", true);
        check_shape(dt, 128, 72, 0, TITAN_FP8_E5M2, false, nullptr, " (ragged columns)", true);
        check_shape(dt, 80, 200, 0, TITAN_FP8_E4M3, false, nullptr, " (ragged rows and columns)", true);
        check_shape(dt, 16, 8, 0, TITAN_FP8_E4M3, false, nullptr, " (smaller than a tile)", true);
        check_shape(dt, 67, 129, 0, TITAN_FP8_E4M3, false, nullptr, " (odd: no tiles)", false);
        check_shape(dt, 300, 64, 0, TITAN_FP8_E4M3, false, nullptr, " (rows not a multiple of 16: no tiles)", false);
        check_shape(dt, 64, 96, 1, TITAN_FP8_E4M3, false, nullptr, " (an unaligned source: no tiles)", false);
        check_shape(dt, 96, 64, 0, TITAN_FP8_E4M3, true, nullptr, " (a NaN)", true);
        /* a given amax below x's: codes saturate; far above: they underflow */
        const float small = 1e-3f, large = 1e6f;
        check_shape(dt, 64, 128, 0, TITAN_FP8_E4M3, false, &small, " (given amax: saturating)", true);
        check_shape(dt, 64, 128, 0, TITAN_FP8_E5M2, false, &large, " (given amax: subnormals and zeros)", true);
    }
    printf("%d of %d cases passed\n", cases - failed, cases);
    return failed ? 1 : 0;
}
