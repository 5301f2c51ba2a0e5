/* pack.h - one checkpoint as a single tar.zst file, and back.
 *
 * The archive (pax tar, zstd) holds step-N/ with its metadata.json and data
 * files, and a `latest` file naming it, so unpacking into an empty directory
 * gives a checkpoint root; when the checkpoint belongs to a run, the run's
 * config.toml comes first, and unpacking makes the directory that run again
 * (config.toml, the steps under its checkpoint.folder). Unpacking refuses
 * absolute names, `..`, links, device files and any name that is not latest,
 * config.toml, step-N/ or step-N/FILE; it extracts into a staging directory,
 * verifies every checksum, and only then moves the step into place. */
#ifndef TITAN_CKPT_PACK_H
#define TITAN_CKPT_PACK_H

#include "core/error.h"

/* ckpt: a step dir or a root (its latest). The archive is written as
 * OUT.tmp and renamed when complete. */
titan_status titan_ckpt_pack(const char *ckpt, const char *out_path);

/* Unpacks into outdir (created if needed; an existing step of the same
 * number, or an existing config.toml, is refused unless force). */
titan_status titan_ckpt_unpack(const char *in_path, const char *outdir, int force);

#endif
