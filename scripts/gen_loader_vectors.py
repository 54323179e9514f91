#!/usr/bin/env python3
"""Ground truth for the engines' tokenizer loader (issue: "the engine's tokenizer loader, not
just tokenizer.json").

Engines build their tokenizer with transformers' AutoTokenizer. transformers 5.x takes the list
of added tokens from tokenizer_config.json's `added_tokens_decoder` when the file has one (an
added token that only tokenizer.json lists is then ordinary text); transformers 4.x keeps
tokenizer.json's list. For google/gemma-2-9b-it the two files disagree on 32 tokens
(ids 255968-255999).

Reproduce (no torch needed):

    python3 -m venv /tmp/tf5 && /tmp/tf5/bin/pip install transformers==5.12.1 tokenizers==0.22.2
    python3 -m venv /tmp/tf4 && /tmp/tf4/bin/pip install transformers==4.57.6 tokenizers==0.22.2
    /tmp/tf5/bin/python scripts/gen_loader_vectors.py tf5 > /tmp/tf5.json
    /tmp/tf4/bin/python scripts/gen_loader_vectors.py tf4 > /tmp/tf4.json
    python3 scripts/gen_loader_vectors.py merge /tmp/tf5.json /tmp/tf4.json \
        > testdata/vectors/loader/gemma2-9b-it-added-tokens.json

The model directory handed to AutoTokenizer holds the pinned tokenizer.json and
tokenizer_config.json of testdata/models/google__gemma-2-9b-it plus a config.json with
`model_type: gemma2` (the engines' checkpoints have one; it selects the tokenizer class).
"""
import json
import os
import shutil
import sys
import tempfile

MODEL = "google__gemma-2-9b-it"
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "testdata", "models", MODEL)


def texts(tokenizer_json):
    out = []
    for a in tokenizer_json["added_tokens"]:
        c = a["content"]
        out += [c, "x" + c + "y", "hello " + c + " world", c + c]
    out += [
        "def f():\n\t\treturn 1\n",
        "a [toxicity=0] b <unused99> c",
        "<start_of_turn>user\nhi\t\t\there<end_of_turn>",
    ]
    return out


def run(tag):
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    d = tempfile.mkdtemp()
    try:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(SRC, f), d)
        with open(os.path.join(d, "config.json"), "w") as fh:
            json.dump({"model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"]}, fh)
        tj = json.load(open(os.path.join(d, "tokenizer.json")))
        tok = AutoTokenizer.from_pretrained(d)
        res = {
            "tag": tag,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "tokenizer_class": type(tok).__name__,
            "ids": [tok.encode(t, add_special_tokens=False) for t in texts(tj)],
            "texts": texts(tj),
        }
        json.dump(res, sys.stdout)
    finally:
        shutil.rmtree(d)


def merge(a, b):
    x = json.load(open(a))
    y = json.load(open(b))
    assert x["texts"] == y["texts"]
    cfg = json.load(open(os.path.join(SRC, "tokenizer_config.json")))
    tj = json.load(open(os.path.join(SRC, "tokenizer.json")))
    in_cfg = {int(k) for k in cfg["added_tokens_decoder"]}
    only_json = sorted(a["id"] for a in tj["added_tokens"] if a["id"] not in in_cfg)
    doc = {
        "model": "google/gemma-2-9b-it",
        "generator": "scripts/gen_loader_vectors.py",
        "notes": "ids = AutoTokenizer(...).encode(text, add_special_tokens=False) under each "
        "stack; the model directory holds the pinned tokenizer.json and tokenizer_config.json "
        "of testdata/models/google__gemma-2-9b-it and a config.json with model_type gemma2. "
        "transformers 5 takes its added tokens from tokenizer_config.json's "
        "added_tokens_decoder; transformers 4 from tokenizer.json.",
        "added_tokens_only_in_tokenizer_json": only_json,
        "stacks": {
            s["tag"]: {
                "transformers": s["transformers"],
                "tokenizers": s["tokenizers"],
                "tokenizer_class": s["tokenizer_class"],
            }
            for s in (x, y)
        },
        "cases": [
            {"text": t, "ids": {x["tag"]: i5, y["tag"]: i4}}
            for t, i5, i4 in zip(x["texts"], x["ids"], y["ids"])
        ],
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if sys.argv[1] == "merge":
        merge(sys.argv[2], sys.argv[3])
    else:
        run(sys.argv[1])
