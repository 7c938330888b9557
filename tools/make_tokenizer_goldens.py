#!/usr/bin/env python3
"""Produce tokenizer goldens for src/tokenizer tests from the reference HF `tokenizers` library.

Usage:  pip install tokenizers gguf numpy
        python3 tools/make_tokenizer_goldens.py [--cache ~/.cache/wgllm] [--out tests/fixtures/tokenizer]

Writes one JSON file per tokenizer into tests/fixtures/tokenizer/:
  qwen3.json    reference: the official Qwen3 tokenizer.json, used as is.
  smollm2.json  reference: an HF tokenizer rebuilt from the *GGUF* vocabulary of
                models/SmolLM2-135M-Instruct.Q4_1.gguf (see build_smollm2_from_gguf).

Each file holds
  texts:   for each (tokenizer, text file) pair: sha256 of the text bytes, token count,
           sha256 of the ids as int32 little-endian, and the first N_FIRST ids;
  llama2.json + llama2_vocab.txt (SentencePiece-style mode; optional, needs node + npm):
           the LLaMA-2 vocabulary and ids from the pure-JS reference llama-tokenizer-js@1.2.2
           (npm). It ships the HF LLaMA merges, not SentencePiece scores; HF's LlamaConverter
           emits every split of every token ordered by the token's score, so
           score(token) = -(lowest rank of a merge producing it) reproduces the score order.
           llama2_vocab.txt holds the pieces (one per line, raw UTF-8); llama2.json the scores,
           and for moby-dick and the tricky strings the JS ids (add_bos=false,
           add_preceding_space=true; the JS library parses no special tokens, so the C++
           test compares with parse_special=false).
  strings: ~50 tricky strings with full ids (parse_special=True, i.e. added tokens matched),
           ids_no_special (special added tokens treated as plain text: HF
           `encode_special_tokens = True`; non-special added tokens such as Qwen's <think> are
           still matched, as in HF), and the reference decode with/without special tokens.

SmolLM2 equivalence note (verified here and by the C++ tests): llama.cpp's `smollm` pre-type
(src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM) splits with the regex list
  ["\\p{N}", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"]
applied one after another, where each regex keeps matched and unmatched spans as separate
pieces. The HF SmolLM2 tokenizer.json uses pre_tokenizer
  Sequence[Digits(individual_digits=true), ByteLevel(add_prefix_space=false, use_regex=true)]
whose ByteLevel regex is the GPT-2 regex above plus a final `|\\s+` alternative. The extra
`\\s+` only matters for whitespace the other alternatives leave unmatched, and llama.cpp keeps
unmatched spans as pieces anyway, so both produce the same pieces. No normalizer, ByteLevel
decoder, BPE model with the GGUF merges in GGUF order (rank = index), and the 17 GGUF tokens of
type CONTROL (3) as special added tokens (normalized=false).
"""
import argparse
import glob
import hashlib
import json
import os
import struct
import sys
import time

import subprocess
import tempfile

from tokenizers import Tokenizer

N_FIRST = 500
SOTU_PICK = ["1790_george_washington_n.txt", "1863_abraham_lincoln_r.txt",
             "1941_franklin_d_roosevelt_d.txt", "1962_john_f_kennedy_d.txt",
             "2016_barack_obama_d.txt"]

TRICKY = [
    "Hello world",
    " Hello world",
    "Hello  world   with    spaces",
    "\n\n\nthree newlines then text\n",
    "tabs\tand\t\tmixed \t whitespace\r\n windows line\r\nend",
    "trailing spaces    ",
    "    leading spaces",
    "",
    " ",
    "a",
    "I'm sure you'll see they've done it, haven't we? She'd, he's, we're, Y'ALL'S, I'M",
    "don't DON'T Don'T o'clock rock'n'roll",
    "12345678901234567890 and 3.14159, 1,000,000 and -42 and 0x1F",
    "Year 2024: 365 days, 24h/7d, ½ ⅓ ² ³ ٣ ४",
    "Ünïcödé façade naïve café résumé Ångström",
    "e\u0301 vs \u00e9 (combining acute vs precomposed), A\u030a, \u212b angstrom sign",
    "日本語のテキストです。中文测试：你好，世界！한국어 텍스트",
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️",
    "Ελληνικά κείμενο και русский текст и עברית ו العربية",
    "Mixed: abc123def456 _under_score_ camelCaseWord snake_case_word",
    "Punctuation!!! ??? ... --- *** ### $$$ %%% &&& @@@ ((( ))) [[[ ]]] {{{ }}}",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "text<|im_end|>more<|endoftext|>",
    "<|im_start|><|im_start|>nested<|im_end|><|im_end|>",
    "<|im_start",
    "<|im_end|",
    "im_start|>",
    "< |im_end| >",
    "<think>reasoning</think> answer",
    "<tool_call>{\"a\": 1}</tool_call>",
    "<repo_name>wgllm<file_sep>main.cpp<filename>x",
    "def f(x):\n    return x * 2  # comment\n\n\nclass A:\n\tpass\n",
    "int main() { printf(\"%d\\n\", 42); return 0; }",
    "https://example.com/path?query=1&b=2#frag user@example.org",
    "   \n   \n",
    "\u00a0non-breaking\u00a0space\u2003em space\u3000ideographic",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "line\u2028separator\u2029paragraph\u0085nel",
    "\u00ad soft hyphen \u2010 hyphen \u2014 em dash \u2013 en dash",
    "“smart quotes” ‘single’ «guillemets» „low“",
    "ﬁ ligature ﬀ ＦＵＬＬＷＩＤＴＨ ｈａｌｆ",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟙𝟚𝟛",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!" * 100,
    " " * 50 + "x",
    "\n" * 20,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "A.B.C. U.S.A. e.g. i.e. etc.",
    "'s 's 'S 're 'RE 've 'm 'll 'd ' s",
    "\x00\x01\x02 control \x1b[31mred\x1b[0m \x7f",
    "हिन्दी ภาษาไทย ქართული Հայերեն",
    "$100.00 €50 £20 ¥1000 ₹500 ₿0.5",
    # Unicode edge cases where the regex engines (onig in HF, PCRE2 here) could disagree:
    "it'\u017f 'K 'k '\u212a",  # long s / Kelvin sign vs case-insensitive (?i:'s)
    "mongolian\u180evowel sep\u180e \u180e",
    "\u01c5ungla \u01c8 \u1e9e titlecase",
    "\U0001fae0 \U0001fae8 \U00010570\U00010571 \U00011f00 new scripts",
    "\r\n\r\n  \n\t\n \u3000\n\u00a0\u00a0y",
]


def sha256_ids(ids):
    return hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()


def build_smollm2_from_gguf(gguf_path):
    from gguf import GGUFReader
    r = GGUFReader(gguf_path)
    f = r.fields
    assert f["tokenizer.ggml.model"].contents() == "gpt2"
    assert f["tokenizer.ggml.pre"].contents() == "smollm"
    tokens = f["tokenizer.ggml.tokens"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3]
    assert all(ty in (1, 3) for ty in types), "unexpected token types"
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": [m.split(" ", 1) for m in merges]},
    }
    return Tokenizer.from_str(json.dumps(tj))


def goldens(tok, name, texts):
    out = {"tokenizer": name, "generator": "tools/make_tokenizer_goldens.py",
           "tokenizers_version": __import__("tokenizers").__version__, "texts": [], "strings": []}
    for rel, data in texts:
        t0 = time.time()
        ids = tok.encode(data, add_special_tokens=False).ids
        dt = time.time() - t0
        out["texts"].append({
            "path": rel, "text_sha256": hashlib.sha256(data.encode("utf-8")).hexdigest(),
            "count": len(ids), "ids_sha256": sha256_ids(ids), "first_ids": ids[:N_FIRST]})
        print(f"  {name} {rel}: {len(ids)} tokens in {dt:.2f}s", file=sys.stderr)
    for s in TRICKY:
        tok.encode_special_tokens = False
        ids = tok.encode(s, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        ids_ns = tok.encode(s, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        out["strings"].append({
            "text": s, "ids": ids, "ids_no_special": ids_ns,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return out


NODE_SCRIPT = r"""
import tok from '%(js)s';
import fs from 'fs';
const inp = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const v = tok.vocabById;
const rank = new Array(v.length).fill(null);
for (const [k, p] of tok.merges) {         // p = 2*index+1 (merge priority)
  const [a, b] = k.split(' ');
  const t = tok.vocabByString.get(a + b);
  if (t !== undefined && (rank[t] === null || rank[t] > p)) rank[t] = p;
}
const out = {vocab: v, rank: rank, texts: inp.texts.map(t => tok.encode(t, false, true)),
             strings: inp.strings.map(t => tok.encode(t, false, true))};
fs.writeFileSync(process.argv[3], JSON.stringify(out));
"""


def llama2_goldens(out_dir, texts):
    work = tempfile.mkdtemp(prefix="wgllm_ltjs_")
    subprocess.run(["npm", "pack", "-q", "llama-tokenizer-js@1.2.2"], cwd=work, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["tar", "xzf", "llama-tokenizer-js-1.2.2.tgz"], cwd=work, check=True)
    js = os.path.join(work, "package", "llama-tokenizer.js")
    with open(os.path.join(work, "run.mjs"), "w") as fh:
        fh.write(NODE_SCRIPT % {"js": js})
    strings = [s for s in TRICKY if s]  # the JS encoder returns [] for "" only without prefix
    with open(os.path.join(work, "in.json"), "w") as fh:
        json.dump({"texts": [t for _, t in texts], "strings": strings}, fh)
    subprocess.run(["node", "run.mjs", "in.json", "out.json"], cwd=work, check=True)
    with open(os.path.join(work, "out.json")) as fh:
        r = json.load(fh)
    assert all("\n" not in p for p in r["vocab"])
    with open(os.path.join(out_dir, "llama2_vocab.txt"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(r["vocab"]))
    g = {"tokenizer": "llama2 (llama-tokenizer-js@1.2.2)", "generator": "tools/make_tokenizer_goldens.py",
         "scores": [0 if x is None else -x for x in r["rank"]], "texts": [], "strings": []}
    for (rel, data), ids in zip(texts, r["texts"]):
        g["texts"].append({"path": rel, "text_sha256": hashlib.sha256(data.encode("utf-8")).hexdigest(),
                           "count": len(ids), "ids_sha256": sha256_ids(ids), "first_ids": ids[:N_FIRST]})
    for s, ids in zip(strings, r["strings"]):
        g["strings"].append({"text": s, "ids_no_special": ids})
    path = os.path.join(out_dir, "llama2.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(g, fh, ensure_ascii=True, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.environ.get("WGLLM_CACHE",
                                                      os.path.expanduser("~/.cache/wgllm")))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "tokenizer"))
    ap.add_argument("--no-llama-js", action="store_true", help="skip the llama-tokenizer-js goldens")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    def read(rel):
        with open(os.path.join(a.cache, rel), "rb") as fh:
            return fh.read().decode("utf-8")

    texts = [("text/package/moby-dick/data/data.txt", read("text/package/moby-dick/data/data.txt"))]
    sotu_files = sorted(glob.glob(os.path.join(a.cache, "text/package/sotu/data/*.txt")))
    for fn in SOTU_PICK:
        rel = "text/package/sotu/data/" + fn
        texts.append((rel, read(rel)))
    # All speeches concatenated in sorted file-name order, no separator ("sotu/*" in the goldens).
    texts.append(("text/package/sotu/data/*.txt",
                  "".join(read(os.path.relpath(p, a.cache)) for p in sotu_files)))

    qwen = Tokenizer.from_file(os.path.join(a.cache, "tokenizers/qwen3/tokenizer.json"))
    smol = build_smollm2_from_gguf(os.path.join(a.cache, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    for name, tok in (("qwen3", qwen), ("smollm2", smol)):
        g = goldens(tok, name, texts)
        path = os.path.join(a.out, name + ".json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(g, fh, ensure_ascii=True, separators=(",", ":"))
            fh.write("\n")
        print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)
    if not a.no_llama_js:
        llama2_goldens(a.out, texts[:2])


if __name__ == "__main__":
    main()
