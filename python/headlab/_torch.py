"""Model.to_torch: the same model in PyTorch, from docs/model.md alone."""
import math

from . import _tokens


def to_torch(spec, params):
    import numpy as np
    import torch
    from torch import nn

    d, h = spec["d_model"], spec["heads"]
    d_k = d // h

    def norm():
        return nn.LayerNorm(d, eps=1e-5) if spec["layernorm"] else nn.Identity()

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

        def forward(self, x, pad=None):
            B, T, _ = x.shape
            q, k, v = (p(x).view(B, T, h, d_k).transpose(1, 2) for p in (self.q, self.k, self.v))
            scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
            if spec["causal"]:
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
            if pad is not None:  # [B, T] true at padding: no query reads a pad key
                scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
            z = torch.softmax(scores, dim=-1) @ v
            return self.o(z.transpose(1, 2).reshape(B, T, d))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(d, spec["d_ff"])
            self.fc2 = nn.Linear(spec["d_ff"], d)
            self.act = nn.GELU() if spec["activation"] == "gelu" else nn.ReLU()

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = norm()
            self.attn = Attention()
            if not spec["attn_only"]:
                self.ln2 = norm()
                self.mlp = MLP()

        def forward(self, x, pad=None):
            x = x + self.attn(self.ln1(x), pad)
            if not spec["attn_only"]:
                x = x + self.mlp(self.ln2(x))
            return x

    class Transformer(nn.Module):
        """headlab's transformer (docs/model.md): forward(tokens [B, T] or [T],
        lengths=None) -> logits [B, T, C]; lengths [B] marks each row's real
        tokens, whose padding no query attends to (as headlab's padding mask)."""

        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(spec["vocab"], d)
            self.pos_emb = nn.Embedding(spec["max_seq_len"], d)
            self.blocks = nn.ModuleList(Block() for _ in range(spec["layers"]))
            self.ln_f = norm()
            self.head = nn.Linear(d, spec["classes"])

        def forward(self, tokens, lengths=None):
            device = tokens.device if isinstance(tokens, torch.Tensor) else None
            # Checked as headlab's model checks them (a 1-D sequence is a batch
            # of one), so that an id outside the vocabulary or a position past
            # max_seq_len is named, not an IndexError from deep in nn.Embedding.
            tokens = torch.as_tensor(_tokens.tokens(tokens, spec), dtype=torch.long, device=device)
            T = tokens.shape[-1]
            pad = None
            if lengths is not None:
                lengths = torch.as_tensor(lengths, dtype=torch.long, device=tokens.device)
                pad = torch.arange(T, device=tokens.device)[None, :] >= lengths.reshape(-1, 1)
            x = self.tok_emb(tokens) + self.pos_emb(torch.arange(T, device=tokens.device))
            for block in self.blocks:
                x = block(x, pad)
            return self.head(self.ln_f(x))

    model = Transformer()
    dtype = torch.float64 if next(iter(params.values())).dtype == np.float64 else torch.float32
    model.to(dtype)
    model.load_state_dict({name: torch.from_numpy(np.array(value)) for name, value in params.items()}, strict=True)
    return model.eval()
