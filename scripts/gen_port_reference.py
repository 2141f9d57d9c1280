#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes the reference data of the ported-script tests (tests/port/).

Five small PyTorch training scripts (an MLP, a CNN, an LSTM classifier, a transformer encoder
block, a custom Dataset) run a few optimizer steps each. For each, one safetensors file in
tests/port/data/ holds what the Kiln port needs to repeat the run and check it:

  <state_dict names>   the model's initial weights (and buffers), as PyTorch made them
  data.*               the inputs and targets (absent for the custom Dataset, which Kiln computes)
  ref.loss             f64 [steps]: the training loss of every step, before that step's update
  ref.*                other values checked at the end (an eval-mode loss, ...)

The models are tiny and the files a few KB each. Installs torch with pip when it is missing
(the tests never need it). Run from anywhere: python3 scripts/gen_port_reference.py
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pip_ensure import ensure as _ensure  # noqa: E402

_ensure("torch", ["torch"])

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "port", "data")

_DT = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def write_safetensors(path, tensors, metadata):
    """A minimal safetensors writer (the format is a JSON header and raw little-endian bytes)."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        b = t.numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def run(name, model, opt, batches, loss_fn, steps, extra=None, sched=None, meta=None):
    """Saves the initial state, trains `steps` steps over `batches` and writes the file."""
    tensors = {k: v.clone() for k, v in model.state_dict().items()}
    losses = []
    for step in range(steps):
        x, y = batches[step % len(batches)]
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if name == "lstm":
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    tensors["ref.loss"] = torch.tensor(losses, dtype=torch.float64)
    if extra:
        tensors.update(extra(model))
    path = os.path.join(OUT, name + ".safetensors")
    write_safetensors(path, tensors, {"torch": torch.__version__, "steps": str(steps), **(meta or {})})
    print(f"{path}: {os.path.getsize(path)} bytes, loss {losses[0]:.6f} -> {losses[-1]:.6f}")


def mlp():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    run("mlp", model, opt, [(x, y)], F.cross_entropy, 10, extra=lambda m: {"data.x": x, "data.y": y})


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)  # a bias before batch norm gets only rounding noise
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 2 * 2, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


def cnn():
    torch.manual_seed(2)
    model = Cnn()
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def extra(m):
        m.eval()
        with torch.no_grad():
            ev = F.cross_entropy(m(x), y)
        return {"data.x": x, "data.y": y, "ref.eval_loss": ev.double().reshape(1),
                "ref.bn1.running_mean": m.bn1.running_mean.clone()}

    run("cnn", model, opt, [(x, y)], F.cross_entropy, 8, extra=extra)


class LstmClassifier(nn.Module):
    def __init__(self, vocab=20, embed=8, hidden=12, classes=3):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, tokens):
        out, (h_n, c_n) = self.lstm(self.embedding(tokens))
        return self.fc(h_n[-1])


def lstm():
    torch.manual_seed(3)
    model = LstmClassifier()
    x, y = torch.randint(0, 20, (6, 7)), torch.randint(0, 3, (6,))
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    run("lstm", model, opt, [(x, y)], F.cross_entropy, 10, extra=lambda m: {"data.x": x, "data.y": y})


class EncoderRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = self.encoder(self.proj(x))
        return self.head(h.mean(dim=1)).squeeze(-1)


def transformer():
    torch.manual_seed(4)
    model = EncoderRegressor()
    x = torch.randn(4, 5, 4)
    y = x.sum(dim=(1, 2)) * 0.1
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=1e-2)
    run("transformer", model, opt, [(x, y)], F.mse_loss, 8, extra=lambda m: {"data.x": x, "data.y": y})


class WaveDataset(torch.utils.data.Dataset):
    """Item i: features sin(0.3 i + 0.7 k) for k < 3, target sum(features) / 2 + cos(0.1 i)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        f = [math.sin(0.3 * i + 0.7 * k) for k in range(3)]
        return torch.tensor(f, dtype=torch.float32), torch.tensor([sum(f) / 2 + math.cos(0.1 * i)], dtype=torch.float32)


def dataset():
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    loader = torch.utils.data.DataLoader(WaveDataset(), batch_size=4, shuffle=False)
    batches = list(loader)  # 3 batches an epoch, in order
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)  # stepped every batch here
    run("dataset", model, opt, batches, F.mse_loss, 9, sched=sched)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for fn in (mlp, cnn, lstm, transformer, dataset):
        fn()
