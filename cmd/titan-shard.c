/* titan-shard - corpus -> tokenized shard directory (titan-shard(1), (5)). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/log.h"
#include "core/version.h"
#include "data/corpus.h"
#include "data/shard.h"
#include "data/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: titan-shard [options] INPUT... -o DIR\n"
            "       titan-shard --stats DIR\n"
            "\n"
            "Tokenizes texts into a shard directory for titan-train. An INPUT is a file,\n"
            "a directory, an archive or compressed file (tar, zip, .tgz, .gz, .zst, .xz),\n"
            "or - for stdin. .json files hold an array of strings, .jsonl/.ndjson one\n"
            "object per line; other files are one document each.\n"
            "\n"
            "  -o, --output DIR       write the shards into DIR (required)\n"
            "      --tokenizer NAME   tokenizer (%s; default byte)\n"
            "      --shard-tokens N   tokens per shard file, suffix K, M or G (default 16M)\n"
            "      --field NAME       JSON Lines member that holds the text (default text)\n"
            "      --stdin-name NAME  the file name stdin stands for (x.jsonl), setting its kind\n"
            "  -f, --force            replace the shards already in DIR\n"
            "      --stats DIR        verify DIR and print its statistics on stdout\n"
            "  -q, --quiet            print errors only\n"
            "  -v, --verbose          print every source read or skipped\n"
            "  -h, --help             print this help\n"
            "      --version          print the version\n",
            titan_tokenizer_choices());
}

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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

static titan_status add_doc(void *ctx, const char *source, const char *text, size_t n) {
    titan_status st = titan_shard_writer_add_text(ctx, text, n);
    if (st != TITAN_OK) titan_error_context("%s", source);
    return st;
}

typedef struct {
    const char *out, *tokenizer, *field, *stats, *stdin_name;
    uint64_t shard_tokens;
    int force;
} options;

static titan_status run(const options *o, char **inputs, int n_inputs) {
    for (int i = 0; i < n_inputs; i++) TITAN_TRY(titan_corpus_check(inputs[i]));
    titan_tokenizer *tok;
    TITAN_TRY(titan_tokenizer_open(&tok, o->tokenizer));
    titan_shard_writer *w;
    titan_status st = titan_shard_writer_open(&w, o->out, tok, o->shard_tokens, o->force);
    if (st != TITAN_OK) {
        titan_tokenizer_free(tok);
        return st;
    }
    double t0 = now_s();
    titan_corpus_opts copts = {.field = o->field, .stdin_name = o->stdin_name};
    titan_corpus_stats cs = {0};
    for (int i = 0; st == TITAN_OK && i < n_inputs; i++) {
        titan_debug("reading %s", inputs[i]);
        st = titan_corpus_read(inputs[i], &copts, add_doc, w, &cs);
    }
    if (st == TITAN_OK && cs.documents == 0) {
        st = titan_error(TITAN_ERR_FORMAT, "no documents in the input (%" PRIu64 " sources read, %" PRIu64 " skipped)",
                         cs.sources, cs.skipped);
        titan_error_hint("run with -v to see what was skipped");
    }
    titan_shard_stats ss = {0};
    if (st == TITAN_OK) st = titan_shard_writer_finish(w, &ss);
    titan_shard_writer_free(w); /* removes what it wrote unless finished */
    titan_tokenizer_free(tok);
    if (st != TITAN_OK) return st;
    double dt = now_s() - t0;
    titan_info("%" PRIu64 " documents, %" PRIu64 " tokens in %d shard file%s, %.1f MB of text in %.2f s (%.1f MB/s) -> %s",
               ss.documents, ss.tokens, ss.files, ss.files == 1 ? "" : "s", 1e-6 * (double)ss.text_bytes, dt,
               dt > 0 ? 1e-6 * (double)ss.text_bytes / dt : 0.0, o->out);
    if (cs.skipped) titan_info("%" PRIu64 " sources skipped (see -v)", cs.skipped);
    return TITAN_OK;
}

int main(int argc, char **argv) {
    titan_log_init("titan-shard");
    enum { OPT_TOKENIZER = 256, OPT_SHARD_TOKENS, OPT_FIELD, OPT_STDIN_NAME, OPT_STATS, OPT_VERSION };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"shard-tokens", required_argument, NULL, OPT_SHARD_TOKENS},
        {"field", required_argument, NULL, OPT_FIELD},
        {"stdin-name", required_argument, NULL, OPT_STDIN_NAME},
        {"force", no_argument, NULL, 'f'},
        {"stats", required_argument, NULL, OPT_STATS},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    options o = {.tokenizer = "byte", .shard_tokens = TITAN_SHARD_DEFAULT_TOKENS};
    int verbosity = 1, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:fqvh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.out = optarg; break;
        case OPT_TOKENIZER: o.tokenizer = optarg; break;
        case OPT_SHARD_TOKENS:
            if (parse_count(optarg, &o.shard_tokens) != TITAN_OK) return titan_report(TITAN_ERR_USAGE);
            break;
        case OPT_FIELD: o.field = optarg; break;
        case OPT_STDIN_NAME: o.stdin_name = optarg; break;
        case 'f': o.force = 1; break;
        case OPT_STATS: o.stats = optarg; break;
        case 'q': verbosity = 0; break;
        case 'v': verbosity = 2; break;
        case 'h': usage(stdout); return 0;
        case OPT_VERSION: printf("titan-shard %s\n", TITAN_VERSION); return 0;
        case ':': return titan_report(usage_error("%s: needs an argument", argv[optind - 1]));
        default:
            if (optopt) {
                char opt[3] = {'-', (char)optopt, '\0'};
                return titan_report(usage_error("%s: unknown option", opt));
            }
            return titan_report(usage_error("%s: unknown option", argv[optind - 1]));
        }
    }
    titan_log_set_verbosity(verbosity);
    char **inputs = argv + optind;
    int n_inputs = argc - optind;
    if (o.stats) {
        if (n_inputs > 0 || o.out)
            return titan_report(usage_error("--stats %s: takes no inputs and no -o", o.stats));
        return titan_report(print_stats(o.stats));
    }
    if (!o.out) return titan_report(usage_error("%s", "no output directory (-o DIR)"));
    if (n_inputs == 0) return titan_report(usage_error("%s", "no input (give files, directories, archives or -)"));
    return titan_report(run(&o, inputs, n_inputs));
}
