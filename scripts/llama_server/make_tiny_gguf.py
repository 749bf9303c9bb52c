"""Write a tiny random-weight llama model in GGUF format, for integration tests only.

The model is a 1-layer llama with a 356-token SentencePiece-style vocabulary: the three special
tokens, the ChatML markers ``<|im_start|>`` / ``<|im_end|>``, the 256 byte-fallback tokens and the
95 printable ASCII characters (space spelled ``▁``). Weights are drawn from a seeded generator,
so the same seed always gives the same file.

Its answers are gibberish, but a llama.cpp server loads it in well under a second and its
grammar-constrained tool calls are valid JSON, which is all the HTTP, SSE, tool-call and
cancellation paths of a client need. The output projection gives the control and byte tokens a
logit of zero and the printable characters large random ones, so sampling (near-greedy at the
usual temperatures) writes printable ASCII, never invalid UTF-8, and does not stop before
``max_tokens``.

Runs in the llama-server virtualenv (it needs ``gguf`` and ``numpy``)::

    .venv-llama/bin/python scripts/llama_server/make_tiny_gguf.py tiny.gguf --seed 0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np

ARCH = "llama"
N_EMBD = 64
N_HEAD = 4
N_FF = 128
N_LAYER = 1
N_CTX = 4096
RMS_EPS = 1e-5

SPECIALS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2
CHATML = ["<|im_start|>", "<|im_end|>"]  # ids 3, 4
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types (356 tokens)."""
    kind = gguf.TokenType
    tokens = [*SPECIALS, *CHATML]
    types = [kind.UNKNOWN, kind.CONTROL, kind.CONTROL, kind.CONTROL, kind.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [kind.BYTE] * 256
    chars = ["▁" if c == " " else c for c in map(chr, range(0x20, 0x7F))]
    tokens += chars
    types += [kind.NORMAL] * len(chars)
    scores = [0.0] * (len(SPECIALS) + len(CHATML) + 256) + [-float(i) for i in range(len(chars))]
    return tokens, scores, [int(t) for t in types]


def output_projection(rng: np.random.Generator, n_vocab: int) -> np.ndarray:
    """Zero rows for the control and byte tokens; rows with logits of a few units (the final
    hidden state is RMS-normalised) for the printable characters."""
    out = np.zeros((n_vocab, N_EMBD), dtype=np.float32)
    first_char = len(SPECIALS) + len(CHATML) + 256
    out[first_char:] = rng.standard_normal((n_vocab - first_char, N_EMBD)) * 0.5
    return out


def write_model(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)

    def weights(*shape: int) -> np.ndarray:
        # numpy shape is (rows, cols) = (out, in); GGUF stores it as ne = [in, out]
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    writer = gguf.GGUFWriter(str(path), ARCH)
    writer.add_name("trio-agents-tiny-random")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(CHATML.index("<|im_end|>") + len(SPECIALS))
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    writer.add_tensor("token_embd.weight", weights(n_vocab, N_EMBD))
    for i in range(N_LAYER):
        block = f"blk.{i}"
        writer.add_tensor(f"{block}.attn_norm.weight", ones(N_EMBD))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weights(N_EMBD, N_EMBD))
        writer.add_tensor(f"{block}.ffn_norm.weight", ones(N_EMBD))
        writer.add_tensor(f"{block}.ffn_gate.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"{block}.ffn_up.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"{block}.ffn_down.weight", weights(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", ones(N_EMBD))
    writer.add_tensor("output.weight", output_projection(rng, n_vocab))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="the .gguf file to write")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    args = parser.parse_args(argv)
    write_model(args.output, args.seed)
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
