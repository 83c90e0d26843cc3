"""What every peer script shares: seqbench's protocol, the model's common pieces (RMSNorm,
the next-token loss) and the train step, so that a family's script holds only its model.

seqbench (harness/peer.h) starts a peer script with `--pipes PREFIX --form FORM` and talks
to it one JSON line a message over PREFIX.in (requests) and PREFIX.out (answers):
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

A family's script calls serve(FORMS) with FORMS mapping each form's name to a builder:
build(weights, config, dtype) -> (params, logits_of), where params maps each manifest
name to a leaf tensor of `dtype` that requires grad (the weights, copied), and
logits_of(tokens [B,T] int64, lengths [B] int64, mask [B,T] bool or None) -> [B,T,V].
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


def rms_norm(x, gain):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_NORM_EPSILON) * gain


def next_token_loss(logits, tokens, mask):
    """The mean next-token cross-entropy over non-padding targets."""
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1),
                             reduction="none")
    has_target = (mask[:, 1:] if mask is not None else torch.ones_like(tokens[:, 1:], dtype=torch.bool))
    has_target = has_target.reshape(-1).to(logits.dtype)
    return (losses * has_target).sum() / has_target.sum().clamp_min(1)


def copied(weights, dtype):
    """Each weight as a fresh leaf of `dtype` that requires grad."""
    return {name: w.to(dtype).clone().requires_grad_(True) for name, w in weights.items()}


def read_tensor(path, dtype, shape):
    count = math.prod(shape)
    return torch.from_file(path, shared=False, size=count, dtype=dtype).reshape(shape)


def read_batch(directory, prefix, batch, steps):
    """Tokens, lengths and the padding mask (None where no row is padded)."""
    tokens = read_tensor(os.path.join(directory, prefix + "tokens.bin"), torch.int64, [batch, steps])
    lengths = read_tensor(os.path.join(directory, prefix + "lengths.bin"), torch.int64, [batch])
    mask = torch.arange(steps)[None, :] < lengths[:, None] if int(lengths.min()) < steps else None
    return tokens, lengths, mask


class Peer:
    def __init__(self, build):
        self.build = build

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
        self.batch = read_batch(self.dir, "", *manifest["batch"])
        torch.set_num_threads(int(manifest["threads"]))
        params, self.logits_of = self.build(self.weights, self.config, getattr(torch, manifest["dtype"]))
        self.optimizer = torch.optim.SGD(list(params.values()), lr=LEARNING_RATE)
        return {"torch": torch.__version__, "python": platform.python_version()}

    def train_step(self):
        tokens, lengths, mask = self.batch
        self.optimizer.zero_grad(set_to_none=True)
        loss = next_token_loss(self.logits_of(tokens, lengths, mask), tokens, mask)
        loss.backward()
        self.optimizer.step()

    def check(self, request):
        tokens, lengths, mask = read_batch(self.dir, "check_", *request["batch"])
        params, logits_of = self.build(self.weights, self.config, torch.float64)
        logits = logits_of(tokens, lengths, mask)
        loss = next_token_loss(logits, tokens, mask)
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


def serve(forms, description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pipes", required=True, help="PREFIX of the .in and .out FIFOs")
    parser.add_argument("--form", required=True, choices=sorted(forms))
    args = parser.parse_args()
    peer = Peer(forms[args.form])
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
    return 0
