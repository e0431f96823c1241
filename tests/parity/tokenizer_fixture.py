"""Proves a tokenizer.json written by webtrain loads in Hugging Face
`tokenizers` (Python) and encodes to the same ids.

Run by hand, not in CI (needs `pip install tokenizers`):

    cargo run --release --bin webtrain -- tokenizer --vocab 1000 \
        --corpus tests/fixtures/tokenizer/corpus.txt --out tests/fixtures/tokenizer/tokenizer.json
    python3 tests/parity/tokenizer_fixture.py

It writes tests/fixtures/tokenizer/expected.json: each test string with the
ids Python's tokenizers gives it. The Rust test `tokenizer_matches_hf_python`
encodes the same strings with webtrain and compares.
"""

import json
import pathlib

import tokenizers

HERE = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "tokenizer"

STRINGS = [
    "The jury said it did find that many of Georgia's registration and election laws are outmoded.",
    "Çok güzel bir gün; İstanbul'da ışıklar yanıyor. ğüşöç ĞÜŞÖÇİ",
    "emoji 🐈‍⬛ 👩‍👩‍👧 🇹🇷 and symbols ∑ √ ≤ — “quotes” ‘single’",
    "  leading spaces, tabs\tand\nnewlines\r\n",
    "",
]

tok = tokenizers.Tokenizer.from_file(str(HERE / "tokenizer.json"))
cases = []
for s in STRINGS:
    ids = tok.encode(s, add_special_tokens=False).ids
    assert tok.decode(ids) == s, f"python decode does not round-trip {s!r}"
    cases.append({"text": s, "ids": ids})
out = {"tokenizers_version": tokenizers.__version__, "cases": cases}
(HERE / "expected.json").write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
print(f"wrote {HERE / 'expected.json'} with tokenizers {tokenizers.__version__}")
