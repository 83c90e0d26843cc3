#!/usr/bin/env python3
"""The attention language model (variants/attention/README.md) as a PyTorch user would
write it in eager mode: a decoder-only transformer with rotary positions.

One form:
  naive  per layer, the [B,H,T,T] scores masked above the diagonal, softmax, times v;
         the feed-forward block as the suite's `ffn` names it (gelu, swiglu, geglu).

seqbench runs it through peer_protocol.py (the protocol, the loss and the train step).
"""
import math
import sys

import torch
import torch.nn.functional as F

from peer_protocol import copied, rms_norm, serve

ROPE_BASE = 10000.0


def rope(x):
    """Rotary position embedding, rotate-half form, at absolute positions. x: [B,H,T,dh]."""
    steps, width = x.shape[-2], x.shape[-1]
    inverse = ROPE_BASE ** (-torch.arange(0, width, 2, dtype=x.dtype) / width)
    angles = torch.arange(steps, dtype=x.dtype)[:, None] * inverse[None, :]  # [T, dh/2]
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    first, second = x.chunk(2, -1)
    return x * cos + torch.cat([-second, first], -1) * sin


def feed_forward(u, p, ffn):
    up = u @ p("w_up")
    if ffn == "gelu":
        return F.gelu(up) @ p("w_down")
    a, b = up.chunk(2, -1)
    activated = F.silu(a) if ffn == "swiglu" else F.gelu(a)
    return (activated * b) @ p("w_down")


def build_naive(weights, config, dtype):
    params = copied(weights, dtype)
    heads, layers, ffn = config["heads"], config["layers"], config.get("ffn", "gelu")

    def logits_of(tokens, lengths, mask):
        # Right padding comes after every real token: under the causal mask it changes no
        # real position's logits, so it needs no mask of its own.
        h = F.embedding(tokens, params["embedding"])
        batch, steps, width = h.shape
        head_width = width // heads
        causal = torch.ones(steps, steps, dtype=torch.bool).tril()
        for layer in range(layers):
            p = lambda name: params[f"layers.{layer}.{name}"]
            u = rms_norm(h, p("norm"))
            split = lambda x: x.reshape(batch, steps, heads, head_width).transpose(1, 2)
            q = rope(split(u @ p("w_q"))) / math.sqrt(head_width)
            k, v = rope(split(u @ p("w_k"))), split(u @ p("w_v"))
            scores = (q @ k.transpose(-1, -2)).masked_fill(~causal, float("-inf"))
            o = scores.softmax(-1) @ v  # [B,H,T,dh]
            h = h + o.transpose(1, 2).reshape(batch, steps, width) @ p("w_o")
            h = h + feed_forward(rms_norm(h, p("ffn_norm")), p, ffn)
        return rms_norm(h, params["norm_out"]) @ params["w_out"]

    return params, logits_of


if __name__ == "__main__":
    sys.exit(serve({"naive": build_naive}, __doc__.split("\n")[0]))
