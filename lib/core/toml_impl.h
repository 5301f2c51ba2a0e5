/* toml_impl.h - internals shared by the TOML parser files (toml.c builds the
 * document; toml_lex.c reads the lexical pieces: strings, numbers, blanks).
 * Not part of the public API. */
#ifndef TITAN_CORE_TOML_IMPL_H
#define TITAN_CORE_TOML_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "toml.h"

typedef struct {
    const char *s;
    size_t len, pos;
    int line;
    size_t bol; /* offset of the current line's first byte */
    const char *name;
} titan_toml_parser;

typedef struct { /* growable NUL-terminated byte buffer */
    char *p;
    size_t n, cap;
} titan_toml_sbuf;

/* "name:line:col: cause" for the byte at offset `at`; returns TITAN_ERR_FORMAT. */
titan_status titan_toml_perr(const titan_toml_parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
titan_status titan_toml_nomem(void);
/* Printable text at `at` up to the end of the token, for "got '...'". */
void titan_toml_excerpt(const titan_toml_parser *p, size_t at, char *out, size_t n);

int titan_toml_peek(const titan_toml_parser *p, size_t off); /* byte at pos+off, -1 past the end */
int titan_toml_at_eof(const titan_toml_parser *p);
int titan_toml_is_bare(int c);
int titan_toml_is_digit(int c);
int titan_toml_is_token_char(int c);
void titan_toml_skip_ws(titan_toml_parser *p);
int titan_toml_eat_newline(titan_toml_parser *p);               /* LF or CRLF; 0 if none */
titan_status titan_toml_skip_comment(titan_toml_parser *p);
titan_status titan_toml_skip_ws_nl(titan_toml_parser *p);     /* blanks, newlines, comments */
titan_status titan_toml_check_utf8(const titan_toml_parser *p); /* whole input */

titan_status titan_toml_sbuf_put(titan_toml_sbuf *b, const char *s, size_t n);
/* At the opening quote(s); appends the decoded string to b. multi: triple quotes. */
titan_status titan_toml_parse_basic(titan_toml_parser *p, titan_toml_sbuf *b, int multi);
titan_status titan_toml_parse_literal(titan_toml_parser *p, titan_toml_sbuf *b, int multi);
/* Integers, floats, inf/nan; refuses dates and bare words with a hint. */
titan_status titan_toml_parse_number(titan_toml_parser *p, titan_toml_value *v);

#endif
