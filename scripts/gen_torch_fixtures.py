#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""Writes the small PyTorch fixtures of tests/unit/test_store_torch.cpp into tests/fixtures/torch/.

Run from the repository root:  python3 scripts/gen_torch_fixtures.py
Needs torch. The outputs (a few KB) are checked in, so the C++ tests never need Python.

expected.txt lists what each fixture must load as, one line per entry:
  T <file> <name> <dtype> <ndim> <dims...> <values...>   (values in row-major order, exact decimal)
  M <file> <name>\t<text>                                (a metadata entry)
  S <file> <name_a> <name_b>                             (the two tensors share one storage)
"""
import io
import os
import pickle
import struct
import zipfile

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "torch")
os.makedirs(OUT, exist_ok=True)
lines = []

DT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
      torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
      torch.bool: "bool"}


def num(x):
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        return str(x)
    return repr(float(x))


def expect_tensors(fname, flat):
    for name, t in flat.items():
        if t.dtype in (torch.uint16, torch.uint32, torch.uint64):
            vals = t.detach().flatten().tolist()  # exact, past the int64 range too
        else:
            vals = t.detach().to(torch.float64 if t.dtype.is_floating_point else torch.int64).flatten().tolist()
        lines.append(" ".join(["T", fname, name, DT[t.dtype], str(t.dim())] + [str(s) for s in t.shape] +
                              [num(v) for v in vals]))


def expect_meta(fname, name, text):
    lines.append(f"M {fname} {name}\t{text}")


def save(obj, fname, **kw):
    torch.save(obj, os.path.join(OUT, fname), **kw)


torch.manual_seed(0)


def rounded(t, scale=16):
    """Values with few significant bits, so every dtype holds them exactly."""
    return (t * scale).round() / scale


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3)
        self.bn = torch.nn.BatchNorm2d(3)
        self.fc = torch.nn.Linear(4, 2)


net = Net()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(rounded(torch.randn_like(p)))
    net.bn.running_mean.copy_(rounded(torch.randn(3)))
    net.bn.num_batches_tracked.fill_(7)
sd = net.state_dict()

# 1. A plain state dict, zip and legacy format, and with pickle protocol 4 (STACK_GLOBAL, FRAME, MEMOIZE).
save(sd, "state_dict.pt")
expect_tensors("state_dict.pt", sd)
save(sd, "state_dict_legacy.pt", _use_new_zipfile_serialization=False)
expect_tensors("state_dict_legacy.pt", sd)
save(sd, "state_dict_proto4.pt", pickle_protocol=4)
expect_tensors("state_dict_proto4.pt", sd)

# 2. A nested training checkpoint.
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x = torch.arange(64, dtype=torch.float32).reshape(2, 2, 4, 4) / 64
loss = net.fc(net.bn(net.conv(x)).flatten(1)[:, :4]).sum()
loss.backward()
opt.step()
with torch.no_grad():  # make the optimizer state exactly representable in text
    for st in opt.state.values():
        st["exp_avg"].copy_(rounded(st["exp_avg"], 64))
        st["exp_avg_sq"].copy_(rounded(st["exp_avg_sq"], 1024))
ckpt = {"model": sd, "optimizer": opt.state_dict(), "epoch": 3, "name": "x"}
save(ckpt, "checkpoint.pt")
flat = {f"model.{k}": v for k, v in sd.items()}
osd = opt.state_dict()
for i, st in osd["state"].items():
    for k, v in st.items():
        flat[f"optimizer.state.{i}.{k}"] = v
expect_tensors("checkpoint.pt", flat)
expect_meta("checkpoint.pt", "epoch", "3")
expect_meta("checkpoint.pt", "name", "x")
pg = osd["param_groups"][0]
expect_meta("checkpoint.pt", "optimizer.param_groups.0.lr", repr(pg["lr"]))
expect_meta("checkpoint.pt", "optimizer.param_groups.0.betas.0", repr(pg["betas"][0]))
expect_meta("checkpoint.pt", "optimizer.param_groups.0.amsgrad", repr(pg["amsgrad"]))
expect_meta("checkpoint.pt", "optimizer.param_groups.0.params.3", repr(pg["params"][3]))

# 3. Shared storages and views: a tensor with its transpose, a slice and a reinterpretation.
base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
views = {"base": base, "t": base.t(), "slice": base[1:, 2:], "row": base[2], "other": torch.tensor([5, 6], dtype=torch.int64),
         "expanded": torch.tensor([1.5, 2.5]).expand(3, 2)}
save(views, "views.pt")
expect_tensors("views.pt", views)
for n in ["t", "slice", "row"]:
    lines.append(f"S views.pt base {n}")
save(views, "views_legacy.pt", _use_new_zipfile_serialization=False)
expect_tensors("views_legacy.pt", views)
for n in ["t", "slice", "row"]:
    lines.append(f"S views_legacy.pt base {n}")

# 4. Every dtype, a 0-d and an empty tensor.
vals = torch.tensor([0.0, 1.5, -2.25, 3.0, -128.0, 100.0])
dts = {}
for dt, name in DT.items():
    if dt == torch.bool:
        dts[name] = torch.tensor([True, False, True, True, False, False])
    elif dt == torch.uint8:
        dts[name] = torch.tensor([0, 1, 2, 3, 255, 100], dtype=dt)
    else:
        dts[name] = vals.to(dt) if dt.is_floating_point else torch.tensor([0, 1, -2, 3, -128, 100], dtype=dt)
dts["scalar"] = torch.tensor(2.5)
dts["empty"] = torch.zeros(0, 3)
dts["matrix_f16"] = rounded(torch.randn(2, 3)).half()
save(dts, "dtypes.pt")
expect_tensors("dtypes.pt", dts)

# 5. Odd but legal content: a Parameter, a tensor with Python attributes, torch.Size, a device,
#    bytes, big ints, None, bools, floats, empty containers, a list at the top of a value.
t_attr = torch.tensor([1.0, 2.0])
t_attr.note = "hello"
misc = {"param": torch.nn.Parameter(torch.tensor([0.5, -0.5])), "attr": t_attr, "size": torch.Size([2, 3]),
        "dev": torch.device("cpu"), "bytes": b"ab", "big": 2**70, "neg": -5, "none": None, "flag": True,
        "f": 0.1, "empty": {}, "lst": [torch.tensor([7], dtype=torch.int32), "s", (1, 2.5)], "dtype": torch.float16}
save(misc, "misc.pt")
expect_tensors("misc.pt", {"param": misc["param"], "attr": t_attr, "lst.0": misc["lst"][0]})
for k, v in [("size.0", "2"), ("size.1", "3"), ("dev", "cpu"), ("bytes", "ab"), ("big", str(2**70)), ("neg", "-5"),
             ("none", "None"), ("flag", "True"), ("f", "0.1"), ("empty", "{}"), ("lst.1", "s"), ("lst.2.0", "1"),
             ("lst.2.1", "2.5"), ("dtype", "torch.float16")]:
    expect_meta("misc.pt", k, v)

# 6. Files that must be rejected.
#    a) a whole pickled nn.Module
torch.save(torch.nn.Linear(2, 2), os.path.join(OUT, "module.pt"))


#    b) a torch-shaped zip whose data.pkl calls os.system (built from opcodes; never unpickled here)
def evil_pickle(module, name):
    return (b"\x80\x02c" + module.encode() + b"\n" + name.encode() + b"\nq\x00X\x0b\x00\x00\x00echo pwned!q\x01\x85q\x02Rq\x03."
            )


def torch_zip(path, data_pkl):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("evil/data.pkl", data_pkl)
        z.writestr("evil/byteorder", "little")
        z.writestr("evil/version", "3\n")


torch_zip(os.path.join(OUT, "evil_os_system.pt"), evil_pickle("os", "system"))
torch_zip(os.path.join(OUT, "evil_builtins_eval.pt"), evil_pickle("builtins", "eval"))
#    c) the same in the legacy layout
legacy = io.BytesIO()
pickle.dump(0x1950a86a20f9469cfc6c, legacy, protocol=2)
pickle.dump(1001, legacy, protocol=2)
pickle.dump({"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}},
            legacy, protocol=2)
legacy.write(evil_pickle("posix", "system"))
open(os.path.join(OUT, "evil_legacy.pt"), "wb").write(legacy.getvalue())

# 7. The unsigned dtypes without a legacy storage class, which torch.save writes through
#    _rebuild_tensor_v3 over an untyped (byte) storage: values past the signed range, a slice
#    with an offset and a transposed view sharing their base's storage.
DT.update({torch.uint16: "u16", torch.uint32: "u32", torch.uint64: "u64"})
u64 = torch.tensor([0, 1, 2**63, 2**64 - 1, 12345, 2**40 + 3], dtype=torch.uint64)
u32 = torch.tensor([0, 1, 2**32 - 1, 2**31, 9, 70000], dtype=torch.uint32).reshape(2, 3)
wide = {"u16": torch.tensor([0, 1, 65535, 40000, 7, 300], dtype=torch.uint16), "u32": u32, "u32_t": u32.t(),
        "u64": u64, "u64_slice": u64[2:5]}
save(wide, "unsigned.pt")
expect_tensors("unsigned.pt", wide)
lines.append("S unsigned.pt u32 u32_t")
lines.append("S unsigned.pt u64 u64_slice")

with open(os.path.join(OUT, "expected.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
print(f"wrote {len(os.listdir(OUT))} files, {total} bytes, to {OUT}")
