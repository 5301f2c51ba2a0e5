/* titan-shard - corpus -> tokenized shard directory (titan-shard(1), (5)). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/options.h"
#include "core/progress.h"
#include "core/version.h"
#include "core/fsutil.h"
#include "data/bpe_train.h"
#include "data/bpe_train_corpus.h"
#include "data/corpus.h"
#include "data/shard.h"
#include "data/shard_pipeline.h"
#include "data/shard_split.h"
#include "data/tokenizer.h"

/* --help's prose around the options the table generates. */
static const char intro[] =
    "Tokenizes texts into a shard directory for titan-train. An INPUT is a file,\n"
    "a directory, an archive or compressed file (tar, zip, .tgz, .gz, .zst, .xz),\n"
    "or - for stdin. .json files hold an array of strings, .jsonl/.ndjson one\n"
    "object per line; other files are one document each.";
static const char footer[] =
    "Exit status: 0 ok, 1 failure, 2 usage error, 3 file missing or unreadable,\n"
    "4 malformed input, 6 out of memory, 7 damaged shard data. See titan-shard(1).";

static titan_status usage_error(const char *fmt, const char *arg) {
    titan_status st = titan_error(TITAN_ERR_USAGE, fmt, arg);
    titan_error_hint("see titan-shard --help");
    return st;
}

/* "16777216", "16M", "1G": tokens per shard file. */
static titan_status parse_count(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9') return usage_error("--shard-tokens '%s': not a positive number", s);
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (errno || *end || v == 0 || v > (UINT64_MAX >> 32) >> shift)
        return usage_error("--shard-tokens '%s': not a positive number of tokens (at most 2^32)", s);
    *out = (uint64_t)v << shift;
    if (*out > ((uint64_t)1 << 32)) return usage_error("--shard-tokens '%s': at most 2^32 tokens per file", s);
    return TITAN_OK;
}

/* -j N: 1 to 1024 threads; 0 means the online CPUs. */
static titan_status parse_threads(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
    if (v < 0 || errno || *end || v > 1024) return usage_error("-j '%s': not a number of threads (0 to 1024)", s);
    *out = v == 0 ? titan_shard_pipeline_default_threads() : (int)v;
    return TITAN_OK;
}

static titan_status parse_seed(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    if (s[0] < '0' || s[0] > '9' || errno || *end) return usage_error("--seed '%s': not a non-negative integer", s);
    *out = v;
    return TITAN_OK;
}

static titan_status print_stats(const char *dir) {
    titan_shard_dir *d;
    TITAN_TRY(titan_shard_dir_open(&d, dir));
    printf("directory: %s\n", dir);
    printf("documents: %" PRIu64 "\n", titan_shard_dir_documents(d));
    printf("tokens: %" PRIu64 "\n", titan_shard_dir_tokens(d));
    printf("tokenizer: %s\n", titan_shard_dir_tokenizer(d));
    printf("vocab: %d\n", titan_shard_dir_vocab_size(d));
    printf("shards: %d\n", titan_shard_dir_files(d));
    printf("checksums: ok\n");
    titan_shard_dir_close(d);
    if (fflush(stdout) != 0) return titan_error(TITAN_ERR_IO, "stdout: %s", strerror(errno));
    return TITAN_OK;
}

typedef struct {
    const char *out, *tokenizer, *field, *stats, *stdin_name;
    const char *split, *val_out; /* --split text; NULL: no validation part */
    uint64_t shard_tokens, seed;
    int force, threads;
    int train; /* --train-tokenizer N: the vocabulary size; 0: shard */
} options;

/* Where each document goes, and the progress line. */
typedef struct {
    titan_shard_pipeline *pipe;
    titan_shard_writer *train, *val;
    titan_shard_split *split; /* NULL: everything to train */
    uint64_t index;           /* of the next document */
    uint64_t val_docs;
    const titan_corpus_stats *cs;
    uint64_t total_bytes; /* of the inputs as stored; 0 when unknown */
    titan_progress progress;
    const char *doing; /* the progress line's word for the pass */
} feed;

static void show_progress(feed *f) {
    const char *doing = f->doing ? f->doing : "";
    titan_shard_pipeline_counts c = f->pipe ? titan_shard_pipeline_written(f->pipe) : (titan_shard_pipeline_counts){0};
    char what[160];
    snprintf(what, sizeof what, "%s%" PRIu64 " docs, %.2fM tokens", doing, f->cs->documents, 1e-6 * (double)c.tokens);
    titan_progress_bytes(&f->progress, f->cs->input_bytes, f->total_bytes, f->pipe ? c.text_bytes : f->cs->bytes, what);
}

static titan_status add_doc(void *ctx, const char *source, const char *text, size_t n) {
    (void)source; /* a writer error names its shard file; the document read now is not the one written */
    feed *f = ctx;
    titan_shard_writer *w = f->train;
    if (f->split && titan_shard_split_held_out(f->split, f->index)) {
        w = f->val;
        f->val_docs++;
    }
    f->index++;
    titan_status st = titan_shard_pipeline_add(f->pipe, w, text, n);
    if (titan_progress_due(&f->progress)) show_progress(f);
    return st;
}

static titan_status count_doc(void *ctx, const char *source, const char *text, size_t n) {
    (void)source, (void)text, (void)n;
    feed *f = ctx;
    if (titan_progress_due(&f->progress)) show_progress(f);
    return TITAN_OK;
}

/* Also while a large file is read, before its documents come. */
static void tick(void *ctx) {
    feed *f = ctx;
    if (titan_progress_due(&f->progress)) show_progress(f);
}

/* DIR-val beside DIR ("data/nlp/" -> "data/nlp-val"). */
static titan_status val_dir_of(const options *o, char *out, size_t cap) {
    if (o->val_out) {
        snprintf(out, cap, "%s", o->val_out);
    } else {
        size_t len = strlen(o->out);
        while (len > 1 && o->out[len - 1] == '/') len--;
        const char *base = o->out + len;
        while (base > o->out && base[-1] != '/') base--;
        size_t blen = (size_t)(o->out + len - base);
        if (blen == 0 || (base[0] == '.' && (blen == 1 || (blen == 2 && base[1] == '.'))) || base[0] == '/')
            return usage_error("-o %s: no name to put -val after; give --val-output DIR", o->out);
        if ((size_t)snprintf(out, cap, "%.*s-val", (int)len, o->out) >= cap)
            return usage_error("-o %s: path too long", o->out);
    }
    size_t a = strlen(o->out), b = strlen(out);
    while (a > 1 && o->out[a - 1] == '/') a--;
    while (b > 1 && out[b - 1] == '/') b--;
    struct stat sa, sb;
    if ((a == b && memcmp(o->out, out, a) == 0) ||
        (stat(o->out, &sa) == 0 && stat(out, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino))
        return usage_error("--val-output %s: the same directory as -o; give another", out);
    return TITAN_OK;
}

/* Opens the writers (the validation one with --split) and the pipeline. */
static titan_status open_outputs(const options *o, const titan_tokenizer *tok, const char *val_dir, feed *f) {
    TITAN_TRY(titan_shard_writer_open(&f->train, o->out, tok, o->shard_tokens, o->force));
    if (f->split) TITAN_TRY(titan_shard_writer_open(&f->val, val_dir, tok, o->shard_tokens, o->force));
    return titan_shard_pipeline_open(&f->pipe, tok, o->threads);
}

static titan_status run(const options *o, char **inputs, int n_inputs) {
    for (int i = 0; i < n_inputs; i++) TITAN_TRY(titan_corpus_check(inputs[i]));
    char val_dir[4096] = "";
    double fraction = 0;
    uint64_t count = 0;
    if (o->split) {
        TITAN_TRY(titan_shard_split_parse(o->split, &fraction, &count));
        TITAN_TRY(val_dir_of(o, val_dir, sizeof val_dir));
        for (int i = 0; count && i < n_inputs; i++) {
            struct stat sb;
            if (strcmp(inputs[i], "-") == 0)
                return usage_error("--split %s: a number of documents needs the input read twice, and stdin (-) "
                                   "cannot be; give a fraction (--split 0.01)", o->split);
            if (stat(inputs[i], &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
                titan_status st = titan_error(TITAN_ERR_USAGE, "--split %s: a number of documents needs the input "
                                              "read twice, and %s (not a regular file) cannot be", o->split, inputs[i]);
                titan_error_hint("give a fraction (--split 0.01)");
                return st;
            }
        }
    }
    titan_tokenizer *tok;
    TITAN_TRY(titan_tokenizer_open(&tok, o->tokenizer));
    double t0 = titan_now_s();
    titan_corpus_opts copts = {.field = o->field, .stdin_name = o->stdin_name, .tick = tick};
    titan_corpus_stats cs = {0};
    titan_shard_split split = {0};
    feed f = {.cs = &cs};
    titan_progress_init(&f.progress);
    for (int i = 0; f.progress.on && i < n_inputs; i++) f.total_bytes += titan_corpus_size(inputs[i]);
    titan_status st = TITAN_OK;
    if (count) { /* the count split picks among all documents: count them first */
        f.doing = "counting: ";
        st = titan_corpus_read_all(inputs, n_inputs, &copts, count_doc, &f, &cs);
        f.doing = NULL;
        if (st == TITAN_OK) st = titan_shard_split_init_count(&split, count, cs.documents, o->seed);
        cs = (titan_corpus_stats){0};
        titan_progress_clear(&f.progress);
        titan_progress_init(&f.progress); /* the rate and ETA of the second pass alone */
    } else if (o->split) {
        titan_shard_split_init_fraction(&split, fraction, o->seed);
    }
    if (o->split) f.split = &split;
    if (st == TITAN_OK) st = open_outputs(o, tok, val_dir, &f);
    if (st == TITAN_OK) st = titan_corpus_read_all(inputs, n_inputs, &copts, add_doc, &f, &cs);
    if (st == TITAN_OK) st = titan_shard_pipeline_flush(f.pipe);
    titan_progress_clear(&f.progress);
    if (st == TITAN_OK && f.split && (f.val_docs == 0 || f.val_docs == cs.documents)) {
        st = titan_error(TITAN_ERR_USAGE, "--split %s: %" PRIu64 " of the %" PRIu64 " documents held out; "
                         "both parts need at least one", o->split, f.val_docs, cs.documents);
        titan_error_hint("give a number of documents (--split 10) or another fraction");
    }
    titan_shard_stats ss = {0}, vs = {0};
    if (st == TITAN_OK && f.val) st = titan_shard_writer_finish(f.val, &vs);
    if (st == TITAN_OK) st = titan_shard_writer_finish(f.train, &ss);
    titan_shard_pipeline_free(f.pipe);
    titan_shard_writer_free(f.train); /* each removes what it wrote unless finished */
    titan_shard_writer_free(f.val);
    titan_shard_split_fini(&split);
    titan_tokenizer_free(tok);
    if (st != TITAN_OK) return st;
    double dt = titan_now_s() - t0;
    /* The rate covers all the text read, the held-out part included. */
    double mb = 1e-6 * (double)(ss.text_bytes + vs.text_bytes);
    titan_info("%" PRIu64 " documents, %" PRIu64 " tokens in %d shard file%s, %.1f MB of text in %.2f s (%.1f MB/s, %d thread%s) -> %s",
               ss.documents, ss.tokens, ss.files, ss.files == 1 ? "" : "s", mb, dt, dt > 0 ? mb / dt : 0.0,
               o->threads, o->threads == 1 ? "" : "s", o->out);
    if (f.val)
        titan_info("validation: %" PRIu64 " documents, %" PRIu64 " tokens in %d shard file%s -> %s", vs.documents,
                   vs.tokens, vs.files, vs.files == 1 ? "" : "s", val_dir);
    if (cs.skipped) titan_info("%" PRIu64 " sources skipped (see -v)", cs.skipped);
    return TITAN_OK;
}

/* --train-tokenizer N: "4096" or "4K" tokens. */
static titan_status parse_vocab(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
    if (v >= 0 && !errno && (*end == 'K' || *end == 'k') && v <= TITAN_BPE_TRAIN_VOCAB_MAX) v *= 1024, end++;
    if (v < 256 || errno || *end || v > TITAN_BPE_TRAIN_VOCAB_MAX) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "--train-tokenizer '%s': not a vocabulary size (256 to %d tokens)",
                                      s, TITAN_BPE_TRAIN_VOCAB_MAX);
        titan_error_hint("the size counts the 256 byte tokens and the merges (4096 = 256 + 3840 merges)");
        return st;
    }
    *out = (int)v;
    return TITAN_OK;
}

/* Counts the pre-tokens of every document, learns the merges, writes -o FILE. */
static titan_status train_tokenizer(const options *o, char **inputs, int n_inputs) {
    if (titan_fs_is_dir(o->out)) return usage_error("-o %s: is a directory; --train-tokenizer writes a file", o->out);
    if (!o->force && titan_fs_exists(o->out)) {
        titan_status st = titan_error(TITAN_ERR_USAGE, "-o %s: already exists", o->out);
        titan_error_hint("-f replaces it");
        return st;
    }
    for (int i = 0; i < n_inputs; i++) TITAN_TRY(titan_corpus_check(inputs[i]));
    titan_bpe_trainer *t;
    TITAN_TRY(titan_bpe_trainer_create(&t, o->train));
    double t0 = titan_now_s();
    titan_corpus_opts copts = {.field = o->field, .stdin_name = o->stdin_name};
    titan_corpus_stats cs = {0};
    titan_status st = titan_bpe_trainer_add_corpus(t, inputs, n_inputs, &copts, o->threads, &cs);
    double t1 = titan_now_s();
    if (st == TITAN_OK) st = titan_bpe_trainer_write(t, o->out);
    titan_bpe_train_stats ts;
    titan_bpe_trainer_stats(t, &ts);
    titan_bpe_trainer_free(t);
    if (st != TITAN_OK) return st;
    double t2 = titan_now_s();
    titan_info("%" PRIu64 " documents, %.1f MB of text, %" PRIu64 " distinct pre-tokens, %u merges: %u tokens "
               "(+256 special) in %.2f s (counting %.2f s on %d thread%s, merging %.2f s) -> %s",
               ts.documents, 1e-6 * (double)ts.bytes, ts.distinct, ts.merges, 256 + ts.merges, t2 - t0, t1 - t0,
               o->threads, o->threads == 1 ? "" : "s", t2 - t1, o->out);
    if (256 + ts.merges < ts.vocab_size)
        titan_warn("stopped at %u of %u tokens: no pair of tokens occurs twice more in the text", 256 + ts.merges,
                   ts.vocab_size);
    if (ts.dropped)
        titan_info("%" PRIu64 " rare distinct pre-tokens dropped to stay within %u", ts.dropped, TITAN_BPE_TRAIN_WORDS_MAX);
    if (ts.too_long)
        titan_info("%" PRIu64 " pre-tokens longer than %d bytes not counted", ts.too_long, TITAN_BPE_TRAIN_WORD_BYTES);
    if (cs.skipped) titan_info("%" PRIu64 " sources skipped (see -v)", cs.skipped);
    return TITAN_OK;
}

/* What the options ask for: statistics, a tokenizer, or shards. */
static titan_status run_mode(const options *o, char **inputs, int n_inputs) {
    if (o->stats) {
        if (n_inputs > 0 || o->out) return usage_error("--stats %s: takes no inputs and no -o", o->stats);
        return print_stats(o->stats);
    }
    if (o->train) { /* a tokenizer or a split for the shards would be a mistake here */
        if (!o->out) return usage_error("%s", "--train-tokenizer: no output file (-o FILE)");
        if (n_inputs == 0) return usage_error("%s", "no input (give files, directories, archives or -)");
        if (strcmp(o->tokenizer, "byte") != 0 || o->split || o->val_out)
            return usage_error("%s", "--train-tokenizer: takes no --tokenizer, --split or --val-output");
        return train_tokenizer(o, inputs, n_inputs);
    }
    if (!o->out) return usage_error("%s", "no output directory (-o DIR)");
    if (n_inputs == 0) return usage_error("%s", "no input (give files, directories, archives or -)");
    if (o->val_out && !o->split) return usage_error("--val-output %s: needs --split", o->val_out);
    return run(o, inputs, n_inputs);
}

/* The table's callbacks: the value parsers above, into the option's target. */
static titan_status opt_count(const titan_option *opt, const char *as, const char *v) {
    return parse_count(v, opt->target);
}
static titan_status opt_threads(const titan_option *opt, const char *as, const char *v) {
    return parse_threads(v, opt->target);
}
static titan_status opt_seed(const titan_option *opt, const char *as, const char *v) {
    return parse_seed(v, opt->target);
}
static titan_status opt_vocab(const titan_option *opt, const char *as, const char *v) {
    return parse_vocab(v, opt->target);
}

int main(int argc, char **argv) {
    titan_log_init("titan-shard");
    options o = {.tokenizer = "byte", .shard_tokens = TITAN_SHARD_DEFAULT_TOKENS,
                 .threads = titan_shard_pipeline_default_threads()};
    int verbosity = 1;
    char tok_help[512];
    snprintf(tok_help, sizeof tok_help, "tokenizer (%s; default byte)", titan_tokenizer_choices());
    const titan_option table[] = {
        {TITAN_OPT(STRING, "output", 'o', &o.out, "DIR", "write the shards into DIR (required)")},
        {TITAN_OPT(STRING, "tokenizer", 0, &o.tokenizer, "NAME", tok_help)},
        {TITAN_OPT(CALLBACK, "shard-tokens", 0, &o.shard_tokens, "N",
         "tokens per shard file, suffix K, M or G (default 16M)"), .fn = opt_count},
        {TITAN_OPT(CALLBACK, "threads", 'j', &o.threads, "N", "threads that tokenize (default: the online CPUs)"),
         .fn = opt_threads},
        {TITAN_OPT(STRING, "split", 0, &o.split, "F|N", "hold out a fraction F (0.01, 1%) or N documents for\n"
         "validation, written to DIR-val (or --val-output)")},
        {TITAN_OPT(STRING, "val-output", 0, &o.val_out, "VDIR", "where the held-out documents go (default DIR-val)")},
        {TITAN_OPT(CALLBACK, "seed", 0, &o.seed, "N", "seed of the --split choice (default 0)"), .fn = opt_seed},
        {TITAN_OPT(STRING, "field", 0, &o.field, "NAME", "JSON Lines member that holds the text (default text)")},
        {TITAN_OPT(STRING, "stdin-name", 0, &o.stdin_name, "NAME",
         "the file name stdin stands for (x.jsonl), setting its kind")},
        {TITAN_OPT(FLAG, "force", 'f', &o.force, NULL, "replace the shards already in DIR")},
        {TITAN_OPT(STRING, "stats", 0, &o.stats, "DIR", "verify DIR and print its statistics on stdout")},
        {TITAN_OPT(CALLBACK, "train-tokenizer", 0, &o.train, "N",
         "learn a byte-level BPE vocabulary of N tokens (the 256\n"
         "bytes and N-256 merges) from the INPUTs and write it to\n"
         "-o FILE, for --tokenizer tiktoken:FILE"), .fn = opt_vocab},
        {TITAN_OPT(SET_INT, "quiet", 'q', &verbosity, NULL, "print errors only"), .value = 0},
        {TITAN_OPT(SET_INT, "verbose", 'v', &verbosity, NULL, "print every source read or skipped"), .value = 2},
        TITAN_OPTS_HELP_VERSION,
        {0},
    };
    const titan_opt_spec spec = {
        .prog = "titan-shard",
        .usage = "[options] INPUT... -o DIR\n--stats DIR\n--train-tokenizer N [options] INPUT... -o FILE",
        .intro = intro, .footer = footer, .opts = table,
    };
    static titan_opt_result r; /* static: its lists live until exit, reachable (LeakSanitizer) */
    int code = titan_opt_main(&spec, argc, argv, &r, &verbosity);
    if (code >= 0) return code;
    return titan_report(run_mode(&o, r.pos, r.npos));
}
