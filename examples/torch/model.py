"""A tiny causal transformer over bytes, and the one training step warm-up and training share.

The warm-up fills torch.compile's caches only for the graphs training will ask for: the
same model, the same shapes, the same step. Both scripts build everything here.

MODEL_SIZE (environment, default 1) is how much there is to compile: 1 compiles the
whole model as one region (a forward and a backward graph); N > 1 gives it N blocks,
each with its own MLP width (so no two compile to the same graph, which the cache would
share) and each compiled on its own, and the embedding and the head compiled apart too: N + 2
regions, each a forward and a backward graph. Warm-up and training must see the same
MODEL_SIZE.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256  # bytes
SEQ = 64
BATCH = 16
DIM = 64
HEADS = 4
SIZE = int(os.environ.get("MODEL_SIZE", "1"))
LAYERS = 2 if SIZE == 1 else SIZE
TOKENS_PER_STEP = BATCH * SEQ


class Block(nn.Module):
    def __init__(self, i=0):
        super().__init__()
        hidden = 4 * DIM + 16 * i
        self.norm1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, hidden), nn.GELU(), nn.Linear(hidden, DIM))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(DIM, dim=-1)
        q, k, v = (z.view(b, t, HEADS, DIM // HEADS).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, DIM))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        # Size 1 keeps the model whose figures are in docs/RELIABILITY.md: two equal blocks.
        self.blocks = nn.ModuleList(Block(0 if SIZE == 1 else i) for i in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def embed(self, idx):
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))

    def out(self, x):
        return self.head(self.norm(x))

    def forward(self, idx):
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


def corpus():
    """Bytes to learn from: this folder's own source, repeated (deterministic, no download)."""
    here = os.path.dirname(os.path.abspath(__file__))
    data = b"".join(open(os.path.join(here, f), "rb").read() for f in sorted(os.listdir(here)) if f.endswith(".py"))
    return torch.tensor(list(data * 4), dtype=torch.long)


def setup():
    """(compiled model, optimizer, batch sampler), seeded, on CPU."""
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = corpus()
    gen = torch.Generator().manual_seed(0)

    def batch():
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=gen)
        x = torch.stack([data[s : s + SEQ] for s in starts])
        y = torch.stack([data[s + 1 : s + SEQ + 1] for s in starts])
        return x, y

    # dynamic=False: every step has the same shapes, so each region's graphs (forward and
    # backward) are compiled and cached once, and a warm cache serves all of it.
    if SIZE == 1:
        return torch.compile(model, dynamic=False), opt, batch
    for blk in model.blocks:
        blk.compile(dynamic=False)
    model.embed = torch.compile(model.embed, dynamic=False)
    model.out = torch.compile(model.out, dynamic=False)
    return model, opt, batch


def train_step(model, opt, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()
