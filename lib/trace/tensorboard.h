/* tensorboard.h - TensorBoard event files: written beside metrics.jsonl,
 * read back by titan-trace.
 *
 * An event file is a sequence of TFRecords (a little-endian u64 length, the
 * masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the
 * data), each record one tensorflow.Event protobuf: first {wall_time,
 * file_version "brain.Event:2"}, then {wall_time, step, summary {value {tag,
 * simple_value}...}} per step. A file opened to resume a run starts with a
 * SessionLog START at the first step it writes, which makes TensorBoard drop
 * the steps an earlier file holds from there on (steps trained after the
 * last checkpoint and trained again), as metrics.jsonl drops its lines. */
#ifndef TITAN_TRACE_TENSORBOARD_H
#define TITAN_TRACE_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct titan_tb titan_tb;

/* Creates dir (and its parents) and in it a new event file,
 * events.out.tfevents.SECONDS.HOST.PID.0 as torch's SummaryWriter names
 * them. first_step: the first step this file will hold. */
titan_status titan_tb_open(titan_tb **out, const char *dir, int64_t first_step);
/* One event: n scalars of one step, flushed to the file. */
titan_status titan_tb_scalars(titan_tb *tb, int64_t step, double wall_time, const char *const *tags,
                              const double *values, int n);
const char *titan_tb_path(const titan_tb *tb);
void titan_tb_close(titan_tb *tb);

/* TFRecord's checksum: CRC-32C (Castagnoli), rotated right by 15 bits plus
 * 0xa282ead8. */
uint32_t titan_tb_masked_crc(const void *data, size_t n);

/* Reads an event file's scalars: calls fn once per scalar, in file order
 * (a SessionLog START at step s is passed as tag NULL, value s). A record
 * whose framing or checksum is wrong is TITAN_ERR_CORRUPT naming the byte;
 * a protobuf that does not decode is TITAN_ERR_FORMAT. */
typedef titan_status (*titan_tb_scalar_fn)(void *ctx, int64_t step, double wall_time, const char *tag,
                                           double value);
titan_status titan_tb_read(const char *path, titan_tb_scalar_fn fn, void *ctx);
/* The same over bytes in memory; path names them in messages. */
titan_status titan_tb_parse(const void *data, size_t len, const char *path, titan_tb_scalar_fn fn, void *ctx);

#endif
