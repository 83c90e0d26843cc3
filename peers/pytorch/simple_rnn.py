#!/usr/bin/env python3
"""The SimpleRNN language model (variants/simple_rnn/README.md) as a PyTorch user would
write it in eager mode: the peer seqbench times its own variants against.

Three forms of the time mixing, each what a competent user might write:
  index   a per-step loop that reads x[:, t] at every step (what most code does);
  unbind  the same loop over tensors unbound once (no per-step select in backward);
  chunk   gated linear attention's chunkwise form: the pairs within each chunk of 32
          positions as one batched masked product with log-space cumulative decays, and a
          loop over chunks for the state carried between them (tensors unbound once).

seqbench (harness/peer.h) starts this script with `--pipes PREFIX` and talks to it one
JSON line a message over PREFIX.in (requests) and PREFIX.out (answers):
  {"op": "setup", "dir": D}  load D/manifest.json, D/parameters.bin (float64, in the
                             manifest's order), D/tokens.bin and D/lengths.bin (int64)
  {"op": "check", "batch": [R, T]}
                             one float64 train step, without the update, on the rows
                             in D/check_tokens.bin and D/check_lengths.bin; writes
                             D/logits.bin and D/gradients.bin (float64, the manifest's
                             order), answers the loss and the gradients' shapes
  {"op": "time"}             one train step in the workload's dtype, timed with
                             torch.utils.benchmark's clock; answers its seconds and
                             the process's peak resident set
  {"op": "quit"}
Every answer carries "ok"; a failure answers {"ok": false, "error": ...} and goes on.
"""
import argparse
import json
import math
import os
import platform
import resource
import sys
import traceback

import torch
import torch.nn.functional as F
from torch.utils.benchmark.utils.timer import timer as benchmark_clock  # timeit.default_timer

RMS_NORM_EPSILON = 1e-6  # variants/core/language_model.h
LEARNING_RATE = 1e-3  # Variant::kTrainLearningRate: plain SGD
CHUNK = 32


def rms_norm(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_NORM_EPSILON) * gain


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


def forward(params, config, tokens, mask, mixer):
    """Logits [B,T,V] and the mean next-token cross-entropy over non-padding targets."""
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
    logits = rms_norm(h, params["norm_out"]) @ params["w_out"]
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1),
                             reduction="none")
    has_target = (mask[:, 1:] if mask is not None else torch.ones_like(tokens[:, 1:], dtype=torch.bool))
    has_target = has_target.reshape(-1).to(logits.dtype)
    return logits, (losses * has_target).sum() / has_target.sum().clamp_min(1)


def read_tensor(path, dtype, shape):
    count = math.prod(shape)
    return torch.from_file(path, shared=False, size=count, dtype=dtype).reshape(shape)


class Peer:
    def __init__(self, form):
        self.mixer = MIXERS[form]

    def setup(self, request):
        self.dir = request["dir"]
        with open(os.path.join(self.dir, "manifest.json")) as f:
            manifest = json.load(f)
        self.config = manifest["config"]
        self.names = [entry["name"] for entry in manifest["parameters"]]
        flat = read_tensor(os.path.join(self.dir, "parameters.bin"), torch.float64,
                           [sum(math.prod(e["shape"]) for e in manifest["parameters"])])
        self.weights, offset = {}, 0
        for entry in manifest["parameters"]:
            size = math.prod(entry["shape"])
            self.weights[entry["name"]] = flat[offset:offset + size].reshape(entry["shape"])
            offset += size
        batch, steps = manifest["batch"]
        self.tokens = read_tensor(os.path.join(self.dir, "tokens.bin"), torch.int64, [batch, steps])
        lengths = read_tensor(os.path.join(self.dir, "lengths.bin"), torch.int64, [batch])
        self.mask = (torch.arange(steps)[None, :] < lengths[:, None]
                     if int(lengths.min()) < steps else None)
        self.threads = int(manifest["threads"])
        torch.set_num_threads(self.threads)
        dtype = getattr(torch, manifest["dtype"])
        self.params = self.trainable(dtype)
        self.optimizer = torch.optim.SGD(list(self.params.values()), lr=LEARNING_RATE)
        return {"torch": torch.__version__, "python": platform.python_version()}

    def trainable(self, dtype):
        return {name: w.to(dtype).clone().requires_grad_(True) for name, w in self.weights.items()}

    def train_step(self):
        self.optimizer.zero_grad(set_to_none=True)
        logits, loss = forward(self.params, self.config, self.tokens, self.mask, self.mixer)
        loss.backward()
        self.optimizer.step()
        return logits, loss

    def check(self, request):
        batch, steps = request["batch"]
        tokens = read_tensor(os.path.join(self.dir, "check_tokens.bin"), torch.int64, [batch, steps])
        lengths = read_tensor(os.path.join(self.dir, "check_lengths.bin"), torch.int64, [batch])
        mask = torch.arange(steps)[None, :] < lengths[:, None] if int(lengths.min()) < steps else None
        params = self.trainable(torch.float64)
        logits, loss = forward(params, self.config, tokens, mask, self.mixer)
        loss.backward()
        logits.detach().numpy().tofile(os.path.join(self.dir, "logits.bin"))
        gradients = [params[name].grad.reshape(-1) for name in self.names]
        torch.cat(gradients).numpy().tofile(os.path.join(self.dir, "gradients.bin"))
        return {"loss": repr(float(loss)), "vocab_size": logits.size(-1),  # "nan" survives
                "shapes": [list(params[name].shape) for name in self.names],
                "gradient_elements": sum(g.numel() for g in gradients)}

    def time(self, request):
        # torch.utils.benchmark's own clock around one step: Timer.timeit(1) would run two
        # untimed steps before each timed one (its per-call warmup), which seqbench's
        # warmup already does once per case.
        began = benchmark_clock()
        self.train_step()
        seconds = benchmark_clock() - began
        return {"seconds": seconds,
                "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipes", required=True, help="PREFIX of the .in and .out FIFOs")
    parser.add_argument("--form", required=True, choices=sorted(MIXERS))
    args = parser.parse_args()
    peer = Peer(args.form)
    with open(args.pipes + ".in") as requests, open(args.pipes + ".out", "w") as answers:
        for line in requests:
            request = json.loads(line)
            if request["op"] == "quit":
                break
            try:
                if request["op"] not in ("setup", "check", "time"):
                    raise ValueError(f"unknown request {request['op']!r}")
                answer = dict(getattr(peer, request["op"])(request), ok=True)
            except Exception as error:  # the case's error, not the peer's end
                answer = {"ok": False, "error": f"{type(error).__name__}: {error}",
                          "trace": traceback.format_exc(limit=3)}
            answers.write(json.dumps(answer) + "\n")
            answers.flush()


if __name__ == "__main__":
    sys.exit(main())
