#!/usr/bin/env python3
"""The SimpleRNN language model (variants/simple_rnn/README.md) as a PyTorch user would
write it in eager mode: the peer seqbench times its own variants against.

Three forms of the time mixing, each what a competent user might write:
  index   a per-step loop that reads x[:, t] at every step (what most code does);
  unbind  the same loop over tensors unbound once (no per-step select in backward);
  chunk   gated linear attention's chunkwise form: the pairs within each chunk of 32
          positions as one batched masked product with log-space cumulative decays, and a
          loop over chunks for the state carried between them (tensors unbound once).

seqbench runs it through peer_protocol.py (the protocol, the loss and the train step).
"""
import math
import sys

import torch
import torch.nn.functional as F

from peer_protocol import copied, rms_norm, serve

CHUNK = 32


def decays(decay_logits, mask):
    g = torch.sigmoid(decay_logits)
    return g if mask is None else g.masked_fill(~mask[..., None, None], 1.0)


def mix_index(q, k, v, decay_logits, mask):
    """S = diag(g_t) S + k_t v_t^T; o_t = S^T q_t, reading step t by indexing."""
    g = decays(decay_logits, mask)
    batch, steps, heads, width = q.shape
    state = q.new_zeros(batch, heads, width, width)
    outputs = []
    for t in range(steps):
        state = g[:, t].unsqueeze(-1) * state + k[:, t].unsqueeze(-1) * v[:, t].unsqueeze(-2)
        outputs.append((q[:, t].unsqueeze(-2) @ state).squeeze(-2))
    return torch.stack(outputs, 1)


def mix_unbind(q, k, v, decay_logits, mask):
    """The same loop over steps unbound once."""
    g = decays(decay_logits, mask)
    batch, _, heads, width = q.shape
    state = q.new_zeros(batch, heads, width, width)
    outputs = []
    for q_t, k_t, v_t, g_t in zip(q.unbind(1), k.unbind(1), v.unbind(1), g.unbind(1)):
        state = g_t.unsqueeze(-1) * state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        outputs.append((q_t.unsqueeze(-2) @ state).squeeze(-2))
    return torch.stack(outputs, 1)


def mix_chunk(q, k, v, decay_logits, mask):
    """Chunkwise: with b_t the cumulative log decay inside a chunk,
    o_t = (q_t e^{b_t})^T S_0 + sum_{s<=t} ((q_t e^{b_t}) . (k_s e^{-b_s})) v_s.
    Every chunk's pairs in one batched product; only the state passes chunk to chunk."""
    log_g = F.logsigmoid(decay_logits)
    if mask is not None:
        log_g = log_g.masked_fill(~mask[..., None, None], 0.0)
    batch, steps, heads, width = q.shape
    chunks = math.ceil(steps / CHUNK)
    pad = chunks * CHUNK - steps

    def by_chunk(x):  # [B,T,H,dh] -> [B,H,n,C,dh]
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
        return x.reshape(batch, chunks, CHUNK, heads, width).permute(0, 3, 1, 2, 4)

    q, k, v, log_g = by_chunk(q), by_chunk(k), by_chunk(v), by_chunk(log_g)
    b = log_g.cumsum(3)
    q_decayed = q * b.exp()
    causal = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device).tril()
    scores = (q_decayed @ (k * (-b).exp()).transpose(-1, -2)).masked_fill(~causal, 0.0)
    intra = scores @ v  # [B,H,n,C,dh]
    last = b[:, :, :, -1:]  # [B,H,n,1,dh]: each chunk's total
    carried = (k * (last - b).exp()).transpose(-1, -2) @ v  # [B,H,n,dh,dh]
    state = q.new_zeros(batch, heads, width, width)
    incoming = []
    for chunk_state, chunk_decay in zip(carried.unbind(2), last.squeeze(3).exp().unbind(2)):
        incoming.append(state)
        state = chunk_decay.unsqueeze(-1) * state + chunk_state
    o = intra + q_decayed @ torch.stack(incoming, 2)  # [B,H,n,C,dh]
    return o.permute(0, 2, 3, 1, 4).reshape(batch, chunks * CHUNK, heads, width)[:, :steps]


MIXERS = {"index": mix_index, "unbind": mix_unbind, "chunk": mix_chunk}


def logits_of(params, config, tokens, mask, mixer):
    """Logits [B,T,V]."""
    heads, layers = config["heads"], config["layers"]
    h = F.embedding(tokens, params["embedding"])
    batch, steps, width = h.shape
    head_width = width // heads
    for layer in range(layers):
        p = lambda name: params[f"layers.{layer}.{name}"]
        projected = rms_norm(h, p("norm")) @ torch.cat([p("w_q"), p("w_k"), p("w_v"), p("w_g")], 1)
        q, k, v, g = (x.reshape(batch, steps, heads, head_width) for x in projected.chunk(4, -1))
        q = q * (1.0 / math.sqrt(head_width))
        g = g + p("b_g").reshape(heads, head_width)
        if mask is not None:
            k = k.masked_fill(~mask[..., None, None], 0.0)
        h = h + mixer(q, k, v, g, mask).flatten(-2) @ p("w_o")
    return rms_norm(h, params["norm_out"]) @ params["w_out"]


def builder(mixer):
    def build(weights, config, dtype):
        params = copied(weights, dtype)
        return params, lambda tokens, lengths, mask: logits_of(params, config, tokens, mask, mixer)
    return build


if __name__ == "__main__":
    sys.exit(serve({form: builder(mixer) for form, mixer in MIXERS.items()},
                   __doc__.split("\n")[0]))
