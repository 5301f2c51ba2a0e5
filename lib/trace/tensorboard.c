/* tensorboard.c - TensorBoard event files written (tensorboard.h): TFRecord
 * framing and the few protobuf fields of tensorflow.Event it needs, encoded
 * by hand (event.proto: Event.wall_time 1 double, step 2 int64,
 * file_version 3 string, summary 5, session_log 7; SessionLog.status 1,
 * START = 1; Summary.value 1; Summary.Value.tag 1 string, simple_value 2
 * float). */
#include "trace/tensorboard.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/fsutil.h"

struct titan_tb {
    FILE *f;
    char path[4200];
};

/* CRC-32C, reflected polynomial 0x82f63b78, bytewise from a table built once. */
static uint32_t crc32c(const uint8_t *p, size_t n) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t titan_tb_masked_crc(const void *data, size_t n) {
    uint32_t c = crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* A growing protobuf buffer; a failed allocation sticks (ok = 0). */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int ok;
} pbuf;

static void put(pbuf *b, const void *src, size_t n) {
    if (!b->ok || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown) {
            b->ok = 0;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_varint(pbuf *b, uint64_t v) {
    uint8_t tmp[10];
    int k = 0;
    do {
        tmp[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, tmp, (size_t)k);
}

static void put_tag(pbuf *b, int field, int wire) { put_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

static void put_double(pbuf *b, int field, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bits >> (8 * i));
    put_tag(b, field, 1);
    put(b, le, 8);
}

static void put_float(pbuf *b, int field, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
    put_tag(b, field, 5);
    put(b, le, 4);
}

static void put_bytes(pbuf *b, int field, const void *data, size_t n) {
    put_tag(b, field, 2);
    put_varint(b, n);
    put(b, data, n);
}

static titan_status write_record(titan_tb *tb, const pbuf *event) {
    if (!event->ok) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", tb->path);
    uint8_t head[12];
    uint64_t len = event->n;
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)(len >> (8 * i));
    uint32_t c = titan_tb_masked_crc(head, 8);
    for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(c >> (8 * i));
    uint32_t d = titan_tb_masked_crc(event->p, event->n);
    uint8_t tail[4] = {(uint8_t)d, (uint8_t)(d >> 8), (uint8_t)(d >> 16), (uint8_t)(d >> 24)};
    if (fwrite(head, 1, 12, tb->f) != 12 || fwrite(event->p, 1, event->n, tb->f) != event->n ||
        fwrite(tail, 1, 4, tb->f) != 4 || fflush(tb->f) != 0)
        return titan_error(TITAN_ERR_IO, "%s: write failed: %s", tb->path, strerror(errno));
    return TITAN_OK;
}

titan_status titan_tb_open(titan_tb **out, const char *dir, int64_t first_step) {
    *out = NULL;
    TITAN_TRY(titan_fs_mkdir_p(dir));
    titan_tb *tb = calloc(1, sizeof *tb);
    if (!tb) return titan_error(TITAN_ERR_NOMEM, "%s: out of memory", dir);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    double now = (double)time(NULL);
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%.0f.%s.%ld.0", dir, now, host, (long)getpid());
    if (!(tb->f = fopen(tb->path, "wbx"))) { /* never over an earlier file of this second and pid */
        titan_status st = titan_error(TITAN_ERR_IO, "%s: cannot create: %s", tb->path, strerror(errno));
        free(tb);
        return st;
    }
    pbuf e = {.ok = 1};
    put_double(&e, 1, now);
    put_bytes(&e, 3, "brain.Event:2", 13);
    titan_status st = write_record(tb, &e);
    if (st == TITAN_OK && first_step > 1) {
        /* a resumed run: TensorBoard forgets what an earlier file holds from first_step on */
        pbuf log = {.ok = 1};
        put_tag(&log, 1, 0);
        put_varint(&log, 1); /* SessionLog.START */
        e.n = 0;
        put_double(&e, 1, now);
        put_tag(&e, 2, 0);
        put_varint(&e, (uint64_t)first_step);
        put_bytes(&e, 7, log.p, log.n);
        if (!log.ok) e.ok = 0;
        st = write_record(tb, &e);
        free(log.p);
    }
    free(e.p);
    if (st != TITAN_OK) {
        titan_tb_close(tb);
        return st;
    }
    *out = tb;
    return TITAN_OK;
}

titan_status titan_tb_scalars(titan_tb *tb, int64_t step, double wall_time, const char *const *tags,
                              const double *values, int n) {
    pbuf summary = {.ok = 1}, value = {.ok = 1}, e = {.ok = 1};
    for (int i = 0; i < n; i++) {
        value.n = 0;
        put_bytes(&value, 1, tags[i], strlen(tags[i]));
        put_float(&value, 2, (float)values[i]);
        put_bytes(&summary, 1, value.p, value.n);
        if (!value.ok) summary.ok = 0;
    }
    put_double(&e, 1, wall_time);
    put_tag(&e, 2, 0);
    put_varint(&e, (uint64_t)step);
    put_bytes(&e, 5, summary.p, summary.n);
    if (!summary.ok) e.ok = 0;
    titan_status st = write_record(tb, &e);
    free(summary.p);
    free(value.p);
    free(e.p);
    return st;
}

const char *titan_tb_path(const titan_tb *tb) { return tb->path; }

void titan_tb_close(titan_tb *tb) {
    if (!tb) return;
    if (tb->f) fclose(tb->f);
    free(tb);
}
