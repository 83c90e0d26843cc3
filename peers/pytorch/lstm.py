#!/usr/bin/env python3
"""The LSTM language model (variants/lstm/README.md) as a PyTorch user would write it in
eager mode: torch.nn.LSTM over the embedded tokens, packed where the batch is ragged.

One form:
  nn_lstm  torch.nn.LSTM(D, D, num_layers=L, batch_first=True), its weight_ih_l{l}, ...
           set from the suite's weights; a ragged batch goes through
           pack_padded_sequence / pad_packed_sequence, as the model's padding rule asks.

seqbench runs it through peer_protocol.py (the protocol, the loss and the train step).
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from peer_protocol import copied, rms_norm, serve

MODULE_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")  # manifest: layers.{l}.NAME


def build_nn_lstm(weights, config, dtype):
    width, layers = config["width"], config["layers"]
    lstm = torch.nn.LSTM(width, width, num_layers=layers, batch_first=True).to(dtype)
    params = copied({n: w for n, w in weights.items() if not n.startswith("layers.")}, dtype)
    with torch.no_grad():
        for layer in range(layers):
            for name in MODULE_NAMES:
                parameter = getattr(lstm, f"{name}_l{layer}")
                parameter.copy_(weights[f"layers.{layer}.{name}"])
                params[f"layers.{layer}.{name}"] = parameter

    def logits_of(tokens, lengths, mask):
        h = F.embedding(tokens, params["embedding"])
        if mask is None:
            h, _ = lstm(h)
        else:
            packed = pack_padded_sequence(h, lengths, batch_first=True, enforce_sorted=False)
            h, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True,
                                       total_length=tokens.size(1))
        return rms_norm(h, params["norm_out"]) @ params["w_out"]

    return params, logits_of


if __name__ == "__main__":
    sys.exit(serve({"nn_lstm": build_nn_lstm}, __doc__.split("\n")[0]))
