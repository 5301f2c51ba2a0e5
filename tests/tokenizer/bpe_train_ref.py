#!/usr/bin/python3
"""bpe_train_ref.py - a plain, slow byte-level BPE trainer: the reference
that tests/unit/test_bpe_train.c compares lib/data/bpe_train.c with.

    bpe_train_ref.py WORDS VOCAB_SIZE OUT

WORDS holds the pre-tokens with their counts, one "hex(bytes) count" per line
(the C test splits the text, so no regex is needed here). The rule, written
from bpe_train.h and nothing else: tokens 0..255 are the single bytes; then,
until VOCAB_SIZE tokens or until no pair occurs twice, take the most frequent
adjacent pair of tokens (counted over the words, weighted by their counts),
the smallest (left id, right id) among equal counts, make it the next token,
and replace it in every word left to right.

Written to be obviously right rather than fast: every merge scans every word
and takes the best pair by scanning every count. Only the counts are kept up
to date rather than recounted (a word that changes gives back its old pairs
and adds its new ones), and every 50 merges they are checked against a full
recount. OUT gets the tiktoken file: one "base64(bytes) rank" per line.
"""
import base64
import sys


def add_pairs(counts, w, c):
    for pair in zip(w, w[1:]):
        counts[pair] = counts.get(pair, 0) + c
        if counts[pair] == 0:
            del counts[pair]


def count_all(words):
    counts = {}
    for w, c in words:
        add_pairs(counts, w, c)
    return counts


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: bpe_train_ref.py WORDS VOCAB_SIZE OUT")
    words = []
    with open(sys.argv[1]) as f:
        for line in f:
            hexbytes, count = line.split()
            words.append((list(bytes.fromhex(hexbytes)), int(count)))
    vocab_size = int(sys.argv[2])
    tokens = [bytes([b]) for b in range(256)]
    counts = count_all(words)
    while len(tokens) < vocab_size and counts:
        top = max(counts.values())
        if top < 2:
            break
        best = min(p for p, c in counts.items() if c == top)
        new = len(tokens)
        tokens.append(tokens[best[0]] + tokens[best[1]])
        for k, (w, c) in enumerate(words):
            if best[0] not in w or not any(p == best for p in zip(w, w[1:])):
                continue
            add_pairs(counts, w, -c)
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            add_pairs(counts, out, c)
            words[k] = (out, c)
        if len(tokens) % 50 == 0:
            assert counts == count_all(words), "pair counts drifted at token %d" % len(tokens)
    with open(sys.argv[3], "w") as f:
        for rank, t in enumerate(tokens):
            f.write("%s %d\n" % (base64.b64encode(t).decode("ascii"), rank))


if __name__ == "__main__":
    main()
