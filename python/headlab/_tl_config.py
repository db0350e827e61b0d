"""model.cfg: TransformerLens's HookedTransformerConfig names for a headlab
model's shape (model.cfg.n_layers, d_head, n_ctx ...), read from model.spec."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """The fields of HookedTransformerConfig that describe a headlab model.
    Frozen: the shape is the checkpoint's, so a changed field would change
    nothing (a new shape is a new run: headlab.train)."""
    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    d_mlp: int | None           # None: attn-only
    d_vocab: int
    d_vocab_out: int            # the classes, which may differ from the vocabulary
    n_ctx: int
    act_fn: str | None          # "gelu" (exact, erf) or "relu"; None: attn-only
    attn_only: bool
    normalization_type: str | None  # "LN", or None with --no-layernorm
    attention_dir: str          # "causal" or "bidirectional"
    positional_embedding_type: str = "standard"  # learned absolute positions
    eps: float = 1e-5
    device: str = "cpu"         # where it runs: TransformerLens code's `.to(model.cfg.device)` works as it is


def config(spec):
    return Config(n_layers=spec["layers"], n_heads=spec["heads"], d_model=spec["d_model"],
                  d_head=spec["d_model"] // spec["heads"], d_mlp=spec["d_ff"], d_vocab=spec["vocab"],
                  d_vocab_out=spec["classes"], n_ctx=spec["max_seq_len"], act_fn=spec["activation"],
                  attn_only=spec["attn_only"], normalization_type="LN" if spec["layernorm"] else None,
                  attention_dir="causal" if spec["causal"] else "bidirectional")
