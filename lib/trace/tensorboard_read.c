/* tensorboard_read.c - TensorBoard event files read back (tensorboard.h):
 * every record's framing and checksums checked, the Event, Summary and
 * SessionLog fields titan writes decoded, any other field skipped by its
 * wire type. Every length is checked against the bytes left before use. */
#include "trace/tensorboard.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/log.h"


typedef struct {
    const uint8_t *p, *end;
} span;

static int get_varint(span *s, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && s->p < s->end; shift += 7) {
        uint8_t b = *s->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 1;
    }
    return 0;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The next field of s: its number, wire type and, for wire types 1, 2
 * and 5, its bytes in *body; 0 at the end, -1 when it does not decode. */
static int next_field(span *s, int *field, int *wire, uint64_t *num, span *body) {
    if (s->p == s->end) return 0;
    uint64_t key;
    if (!get_varint(s, &key)) return -1;
    *field = (int)(key >> 3);
    *wire = (int)(key & 7);
    size_t left = (size_t)(s->end - s->p), n;
    switch (*wire) {
    case 0: return get_varint(s, num) ? 1 : -1;
    case 1: n = 8; break;
    case 5: n = 4; break;
    case 2:
        if (!get_varint(s, num) || *num > (uint64_t)(s->end - s->p)) return -1;
        n = (size_t)*num;
        left = (size_t)(s->end - s->p);
        break;
    default: return -1;
    }
    if (n > left) return -1;
    body->p = s->p;
    body->end = s->p + n;
    s->p += n;
    return 1;
}

/* One Summary.Value: its tag (copied, at most 255 bytes) and simple_value. */
static int decode_value(span v, char *tag, size_t cap, double *value, int *has) {
    int field, wire, r;
    uint64_t num;
    span body;
    tag[0] = '\0';
    *has = 0;
    while ((r = next_field(&v, &field, &wire, &num, &body)) == 1) {
        if (field == 1 && wire == 2) {
            size_t n = (size_t)(body.end - body.p) < cap - 1 ? (size_t)(body.end - body.p) : cap - 1;
            memcpy(tag, body.p, n);
            tag[n] = '\0';
        } else if (field == 2 && wire == 5) {
            uint32_t bits = (uint32_t)le(body.p, 4);
            float f;
            memcpy(&f, &bits, 4);
            *value = f;
            *has = 1;
        }
    }
    return r;
}

/* One Event: its scalars (and a SessionLog START) passed to fn. */
static titan_status decode_event(span e, const char *path, uint64_t at, titan_tb_scalar_fn fn, void *ctx) {
    int field, wire, r;
    uint64_t num, step = 0;
    double wall = 0;
    span body, summary = {NULL, NULL}, log = {NULL, NULL};
    while ((r = next_field(&e, &field, &wire, &num, &body)) == 1) {
        if (field == 1 && wire == 1) {
            uint64_t bits = le(body.p, 8);
            memcpy(&wall, &bits, 8);
        } else if (field == 2 && wire == 0) {
            step = num;
        } else if (field == 5 && wire == 2) {
            summary = body;
        } else if (field == 7 && wire == 2) {
            log = body;
        }
    }
    if (r < 0) return titan_error(TITAN_ERR_FORMAT, "%s: byte %" PRIu64 ": an Event that does not decode", path, at);
    if (log.p) {
        uint64_t status = 0;
        while ((r = next_field(&log, &field, &wire, &num, &body)) == 1)
            if (field == 1 && wire == 0) status = num;
        if (r < 0) return titan_error(TITAN_ERR_FORMAT, "%s: byte %" PRIu64 ": a SessionLog that does not decode", path, at);
        if (status == 1) TITAN_TRY(fn(ctx, (int64_t)step, wall, NULL, (double)step));
    }
    while (summary.p && (r = next_field(&summary, &field, &wire, &num, &body)) == 1) {
        if (field != 1 || wire != 2) continue;
        char tag[256];
        double value = 0;
        int has;
        if (decode_value(body, tag, sizeof tag, &value, &has) < 0) r = -1;
        else if (has && tag[0]) TITAN_TRY(fn(ctx, (int64_t)step, wall, tag, value));
        if (r < 0) break;
    }
    if (summary.p && r < 0)
        return titan_error(TITAN_ERR_FORMAT, "%s: byte %" PRIu64 ": a Summary that does not decode", path, at);
    return TITAN_OK;
}

/* The file ends inside a record whose length is sound: a run still
 * writing it (TensorBoard waits for the rest too), or a file cut short.
 * What came before is read. */
static void cut_short(const char *path, uint64_t at) {
    titan_warn("%s: byte %" PRIu64 ": the last record is cut short (a run still writing it, or a file cut "
               "short); read up to it", path, at);
}

titan_status titan_tb_parse(const void *data, size_t len, const char *path, titan_tb_scalar_fn fn, void *ctx) {
    const uint8_t *p = data;
    titan_status st = TITAN_OK;
    uint64_t at = 0;
    while (st == TITAN_OK && at < len) {
        if (len - at < 12) {
            cut_short(path, at);
            break;
        }
        uint64_t n = le(p + at, 8);
        if ((uint32_t)le(p + at + 8, 4) != titan_tb_masked_crc(p + at, 8)) {
            st = titan_error(TITAN_ERR_CORRUPT, "%s: byte %" PRIu64 ": record length checksum mismatch", path, at);
            break;
        }
        if (n > len - at - 12 || len - at - 12 - n < 4) {
            cut_short(path, at);
            break;
        }
        const uint8_t *body = p + at + 12;
        if ((uint32_t)le(body + n, 4) != titan_tb_masked_crc(body, (size_t)n)) {
            st = titan_error(TITAN_ERR_CORRUPT, "%s: byte %" PRIu64 ": record data checksum mismatch", path, at + 12);
            break;
        }
        st = decode_event((span){body, body + n}, path, at + 12, fn, ctx);
        at += 12 + n + 4;
    }
    return st;
}

/* The file is mapped, not read: a long run's file is gigabytes. */
titan_status titan_tb_read(const char *path, titan_tb_scalar_fn fn, void *ctx) {
    int fd;
    TITAN_TRY(titan_fs_open_regular(path, &fd));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return titan_error(TITAN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (sb.st_size == 0) {
        close(fd);
        return TITAN_OK;
    }
    void *data = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return titan_error(TITAN_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    titan_status st = titan_tb_parse(data, (size_t)sb.st_size, path, fn, ctx);
    munmap(data, (size_t)sb.st_size);
    return st;
}
