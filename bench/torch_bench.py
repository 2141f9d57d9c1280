#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""PyTorch side of the benchmark suite: the same cases as kiln_bench.cpp, same output format.

    python3 bench/torch_bench.py [--threads N] [--reps R] [--smoke]

One tab-separated line per measurement: id, seconds per call (best of R after warm-up),
bytes moved per call, status. Run by bench/run.sh with the thread count pinned in the
environment too (OMP/MKL/OpenBLAS variables).
"""
import argparse
import gzip
import math
import os
import sys
import time

import torch


def best_of(f, reps, warmup=2):
    for _ in range(warmup):
        f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def emit(case_id, seconds, nbytes, status="ok"):
    print(f"{case_id}\t{seconds:.9g}\t{nbytes:.0f}\t{status}", flush=True)


def case(case_id, nbytes, reps, f, inner=1, warmup=2):
    if not case_id.startswith(os.environ.get("BENCH_ONLY", "")):  # same filter as kiln_bench
        return
    def sample():
        for _ in range(inner):
            f()

    try:
        emit(case_id, best_of(sample, reps, warmup) / inner, nbytes)
    except Exception as e:  # noqa: BLE001 - report and continue
        emit(case_id, 0, nbytes, "skip: " + str(e).replace("\t", " ").replace("\n", " ")[:100])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--memory", nargs="+", metavar=("MODEL", "STEPS"),
                    help="mlp|cnn [steps]: the memory measurement, like kiln_bench --memory")
    a = ap.parse_args()
    if a.memory:
        torch.set_num_threads(a.threads)
        return memory_mode(a.memory[0], int(a.memory[1]) if len(a.memory) > 1 else 1000, a.smoke)
    reps = 1 if a.smoke else a.reps
    warm = 0 if a.smoke else 2
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    side = 64 if a.smoke else 4096
    n = side * side
    fb = n * 4
    x = torch.rand(side, side) * 8 - 4
    y = torch.rand(side, side) * 8 - 4
    row = torch.rand(side) * 8 - 4
    gelu = torch.nn.functional.gelu

    cases = [
        ("unary/relu", 2 * fb, lambda: torch.relu(x)),
        ("unary/exp", 2 * fb, lambda: torch.exp(x)),
        ("unary/sigmoid", 2 * fb, lambda: torch.sigmoid(x)),
        ("unary/gelu", 2 * fb, lambda: gelu(x)),
        ("unary/tanh", 2 * fb, lambda: torch.tanh(x)),
        ("binary/add", 3 * fb, lambda: x + y),
        ("binary/mul", 3 * fb, lambda: x * y),
        ("binary/mul_bcast_row", 2 * fb + side * 4, lambda: x * row),
        ("reduce/sum_all", fb, lambda: x.sum()),
        ("reduce/sum_last", fb, lambda: x.sum(-1)),
        ("reduce/sum_first", fb, lambda: x.sum(0)),
        ("reduce/amax_all", fb, lambda: x.amax()),
        ("reduce/softmax_last", 2 * fb, lambda: torch.softmax(x, -1)),
    ]
    for cid, nb, f in cases:
        case(cid, nb, reps, f, warmup=warm)

    # The elementwise cases again writing into a preallocated output: PyTorch's functional
    # form pays for a fresh 64 MiB allocation (mmap + page faults) on every call, Kiln's
    # caching allocator does not; this column separates kernel speed from allocation cost.
    o = torch.empty_like(x)
    out_cases = [
        ("unary/relu", 2 * fb, lambda: torch.clamp_min(x, 0, out=o)),
        ("unary/exp", 2 * fb, lambda: torch.exp(x, out=o)),
        ("unary/sigmoid", 2 * fb, lambda: torch.sigmoid(x, out=o)),
        ("unary/gelu", 2 * fb, lambda: torch._C._nn.gelu(x, out=o)),
        ("unary/tanh", 2 * fb, lambda: torch.tanh(x, out=o)),
        ("binary/add", 3 * fb, lambda: torch.add(x, y, out=o)),
        ("binary/mul", 3 * fb, lambda: torch.mul(x, y, out=o)),
        ("binary/mul_bcast_row", 2 * fb + side * 4, lambda: torch.mul(x, row, out=o)),
    ]
    for cid, nb, f in out_cases:
        case(cid + "@out", nb, reps, f, warmup=warm)

    # Per-op overhead on 4 elements, as a PyTorch user pays it (including the Python call).
    s = torch.tensor([1.0, 2.0, 3.0, 4.0])
    t = torch.tensor([0.5, 0.25, 2.0, 1.0])
    inner = 10 if a.smoke else 100000
    with torch.inference_mode():
        case("overhead/add", 0, reps, lambda: s + t, inner, warm)
        case("overhead/exp", 0, reps, lambda: s.exp(), inner, warm)
        case("overhead/sum", 0, reps, lambda: s.sum(), inner, warm)

    # ---- matmul (gemm owner's block): same ids as kiln_bench.cpp; bytes field = flops ----
    mm = [(f"matmul/f32_{n}", 1, n, n, n) for n in (16, 64, 256, 512, 1024, 2048) if not a.smoke or n <= 64]
    mm += [("matmul/bmm_32x128x128x128", 2 if a.smoke else 32, 128, 128, 128),
           ("matmul/odd_1000x1001x999", 1, *((10, 11, 9) if a.smoke else (1000, 1001, 999))),
           ("matmul/mv_4096", 1, side, side, 1)]
    with torch.inference_mode():
        for cid, B, M, K, N in mm:
            flops = 2 * B * M * N * K
            inner_mm = 1000 if flops < 1e6 else 20 if flops < 1e8 else 1
            if N == 1:
                ma, mb = x, row
            elif B > 1:
                ma, mb = torch.randn(B, M, K), torch.randn(B, K, N)
            else:
                ma, mb = torch.randn(M, K), torch.randn(K, N)
            case(cid, flops, reps, lambda ma=ma, mb=mb: torch.matmul(ma, mb), inner_mm, warm)
    # ---- end of the matmul block ----

    # ---- convolution (conv owner's block): same ids as kiln_bench.cpp; bytes field 0 ----
    conv_cases = [("mnist_1to32_k3", 1, 28, 32, 3, 0, (1, 32)), ("mnist_32to64_k3", 32, 26, 64, 3, 0, (1, 32)),
                  ("small_16to16_k3", 16, 16, 16, 3, 1, (1, 32)), ("small_64to64_k3", 64, 8, 64, 3, 1, (1, 32)),
                  ("resnet_64to64_k3", 64, 56, 64, 3, 1, (1, 8)), ("resnet_64to256_k1", 64, 56, 256, 1, 0, (1, 8))]
    cb_ = torch.ops.aten.convolution_backward
    with torch.inference_mode():
        for name, C, H, O, k, p, batches in conv_cases:
            for N in batches:
                Hs, Nb = (min(H, 8), 1) if a.smoke else (H, N)
                cid = f"conv/{name}/N{N}"
                cx, cw, cbias = torch.randn(Nb, C, Hs, Hs), torch.randn(O, C, k, k), torch.randn(O)
                cy = torch.nn.functional.conv2d(cx, cw, cbias, padding=p)
                cg = torch.randn_like(cy)
                case(cid + "/fwd", 0, reps,
                     lambda cx=cx, cw=cw, cbias=cbias, p=p: torch.nn.functional.conv2d(cx, cw, cbias, padding=p),
                     warmup=warm)
                case(cid + "/bwd", 0, reps,
                     lambda cx=cx, cw=cw, cg=cg, p=p: cb_(cg, cx, cw, None, [1, 1], [p, p], [1, 1], False, [0, 0], 1,
                                                          [True, True, False]), warmup=warm)
                with torch.enable_grad(), torch.inference_mode(False):
                    ax, aw, ab = (t.clone().requires_grad_() for t in (cx, cw, cbias))
                    ag = cg.clone()

                    def fwdbwd(ax=ax, aw=aw, ab=ab, ag=ag, p=p):
                        return torch.autograd.grad(torch.nn.functional.conv2d(ax, aw, ab, padding=p), [ax, aw, ab], ag)

                    case(cid + "/fwdbwd_ad", 0, reps, fwdbwd, warmup=warm)
        for N in (1, 8):
            Hs, Nb = (4, 1) if a.smoke else (28, N)
            tx, tw, tb = torch.randn(Nb, 64, Hs, Hs), torch.randn(64, 32, 3, 3), torch.randn(32)
            case(f"conv/tr_64to32_k3_s2/N{N}/tr", 0, reps,
                 lambda tx=tx, tw=tw, tb=tb: torch.nn.functional.conv_transpose2d(tx, tw, tb, stride=2, padding=1,
                                                                                  output_padding=1), warmup=warm)
    # ---- end of the convolution block ----

    # ---- normalisation (norm owner's block): same id as kiln_bench.cpp; bytes read + written ----
    rows, cols = (64, 128) if a.smoke else (8192, 1024)
    lx, lw, lb = torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)
    case("norm/layer_norm_8192x1024", 2 * rows * cols * 4, reps,
         lambda: torch.nn.functional.layer_norm(lx, [cols], lw, lb), warmup=warm)
    # ---- end of the normalisation block ----
    # ---- pooling (pool owner's block): same ids as kiln_bench.cpp ----
    px = torch.randn(*((2, 4, 8, 8) if a.smoke else (32, 64, 56, 56)))
    in_b = px.numel() * 4
    F_ = torch.nn.functional
    with torch.inference_mode():
        case("pool/max_pool2d_3x3s2", in_b * 1.25, reps, lambda: F_.max_pool2d(px, 3, 2, 1), 1, warm)
        case("pool/max_pool2d_3x3s2_indices", in_b * 1.75, reps,
             lambda: F_.max_pool2d(px, 3, 2, 1, return_indices=True), 1, warm)
        case("pool/avg_pool2d_3x3s2", in_b * 1.25, reps, lambda: F_.avg_pool2d(px, 3, 2, 1), 1, warm)
        case("pool/avg_pool2d_2x2", in_b * 1.25, reps, lambda: F_.avg_pool2d(px, 2), 1, warm)
        case("pool/adaptive_avg_pool2d_1x1", in_b, reps, lambda: F_.adaptive_avg_pool2d(px, 1), 1, warm)
    # ---- end of the pooling block ----

    # ---- autodiff (autodiff owner's block): same ids as kiln_bench.cpp. add_chain rows are
    # seconds per add (Python call included, as a PyTorch user pays it); lstm rows are one
    # forward + backward, bytes field 0 (PyTorch's CPU allocator reports no peak) ----
    chain = 10 if a.smoke else 1000
    c16 = torch.full((16,), 0.001)
    x16 = torch.randn(16)
    x16g = torch.randn(16, requires_grad=True)

    def add_chain(start):
        y = start
        for _ in range(chain):
            y = y + c16
        return y

    def per_op(cid, f):
        try:
            emit(cid, best_of(f, reps, warm) / chain, 0)
        except Exception as e:  # noqa: BLE001 - report and continue
            emit(cid, 0, 0, "skip: " + str(e).replace("\t", " ").replace("\n", " ")[:100])

    with torch.no_grad():
        per_op("autodiff/add_chain/plain", lambda: add_chain(x16))
    per_op("autodiff/add_chain/record", lambda: add_chain(x16g))
    per_op("autodiff/add_chain/fwd_bwd", lambda: torch.autograd.grad(add_chain(x16g).sum(), [x16g]))

    B, Hd, T = 32, 64, (2 if a.smoke else 16)
    w = [(torch.randn(Hd, Hd) * 0.125).requires_grad_() for _ in range(4)]
    u = [(torch.randn(Hd, Hd) * 0.125).requires_grad_() for _ in range(4)]
    bias = [torch.zeros(Hd, requires_grad=True) for _ in range(4)]
    xs = [torch.randn(B, Hd) for _ in range(T)]
    params = w + u + bias

    def lstm_step():
        h, c = torch.zeros(B, Hd), torch.zeros(B, Hd)
        for t in range(T):
            gi = torch.sigmoid(xs[t] @ w[0] + h @ u[0] + bias[0])
            gf = torch.sigmoid(xs[t] @ w[1] + h @ u[1] + bias[1])
            gg = torch.tanh(xs[t] @ w[2] + h @ u[2] + bias[2])
            go = torch.sigmoid(xs[t] @ w[3] + h @ u[3] + bias[3])
            c = gf * c + gi * gg
            h = go * torch.tanh(c)
        return torch.autograd.grad(h.square().mean(), params)

    case("autodiff/lstm/fwd_bwd", 0, reps, lstm_step, 1, warm)
    # ---- end of the autodiff block ----

    ops_block(reps, warm, a.smoke, x)
    train_block(reps, warm, a.smoke)

    print(f"# torch {torch.__version__}", file=sys.stderr)


# ---- bench owner's blocks: same ids as kiln_bench_ops.cpp and kiln_bench_train.cpp ----------


def ops_block(reps, warm, smoke, x):
    """erf-GELU composite, middle-axis sum, attention, per-op overhead recording a graph."""
    side = x.shape[0]
    fb = side * side * 4
    x = x * 0.5  # randn-like spread as Kiln's randn * 2 (values do not change the speed)
    inv_sqrt2 = 1.0 / math.sqrt(2.0)
    with torch.inference_mode():
        case("unary/gelu_composite", 2 * fb, reps, lambda: x * 0.5 * (torch.erf(x * inv_sqrt2) + 1.0), 1, warm)
        c = 16 if smoke else 256
        x3 = x.reshape(c, c, c)
        case("reduce/sum_mid", fb, reps, lambda: x3.sum(1), 1, warm)
        B, H, L, D = (1, 2, 16, 8) if smoke else (4, 8, 256, 64)
        q, k, v = torch.randn(B, H, L, D), torch.randn(B, H, L, D), torch.randn(B, H, L, D)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        fl = 4 * B * H * L * L * D
        case("attn/sdpa_b4h8l256d64", fl, reps, lambda: sdpa(q, k, v), 1, warm)
        case("attn/sdpa_b4h8l256d64/causal", fl / 2, reps, lambda: sdpa(q, k, v, is_causal=True), 1, warm)
    a = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    b = torch.tensor([0.5, 0.25, 2.0, 1.0], requires_grad=True)
    inner = 10 if smoke else 100000
    case("overhead/add_ad", 0, reps, lambda: a + b, inner, warm)
    case("overhead/exp_ad", 0, reps, lambda: a.exp(), inner, warm)
    case("overhead/sum_ad", 0, reps, lambda: a.sum(), inner, warm)


def load_idx_gz(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims).copy())


FMNIST_DIR = os.environ.get("KILN_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def make_models():
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    # PyTorch's examples/mnist Net (cross-entropy on the logits instead of log_softmax + nll_loss).
    cnn = nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Dropout(0.25), nn.Flatten(1), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                        nn.Linear(128, 10))
    return mlp, cnn


def make_trainer(model, batch):
    torch.manual_seed(0)
    mlp, cnn = make_models()
    net = mlp if model == "mlp" else cnn
    x = torch.randn(batch, 784) if model == "mlp" else torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    net.train()

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def train_block(reps, warm, smoke):
    """Fashion-MNIST loading, MLP and CNN training steps, batch-1 inference."""
    try:
        from torch.utils.data import DataLoader, TensorDataset
        split = "t10k" if smoke else "train"
        imgs = load_idx_gz(os.path.join(FMNIST_DIR, f"{split}-images-idx3-ubyte.gz")).unsqueeze(1)
        labels = load_idx_gz(os.path.join(FMNIST_DIR, f"{split}-labels-idx1-ubyte.gz")).long()
        if smoke:
            imgs, labels = imgs[:256], labels[:256]
        # The same work as kiln::data's default batcher: u8 images stacked and scaled to [0, 1] f32.
        loader = DataLoader(TensorDataset(imgs, labels), batch_size=64, shuffle=True, num_workers=0)

        def epoch():
            seen = 0
            for xb, yb in loader:
                xb = xb.float().div_(255)
                seen += xb.shape[0]
            assert seen == len(labels)

        case("data/fashion_mnist_b64", len(loader), reps, epoch, 1, warm)
    except Exception as e:  # noqa: BLE001 - report and continue
        emit("data/fashion_mnist_b64", 0, 0, "skip: " + str(e).replace("\t", " ").replace("\n", " ")[:100])
    batch = 4 if smoke else 64
    case("train/mlp_784_512_512_10_b64", 0, reps, make_trainer("mlp", batch), 1, warm)
    case("train/cnn_mnist_b64", 0, reps, make_trainer("cnn", batch), 1, warm)
    torch.manual_seed(0)
    _, cnn = make_models()
    tiny = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    cnn.eval()
    tiny.eval()
    xc, xm = torch.randn(1, 1, 28, 28), torch.randn(1, 784)
    with torch.no_grad():
        case("infer/cnn_b1", 0, reps, lambda: cnn(xc), 1 if smoke else 10, warm)
        case("infer/mlp_tiny_b1", 0, reps, lambda: tiny(xm), 1 if smoke else 100, warm)


def proc_status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1]) * 1024
    return 0.0


def memory_mode(model, steps, smoke):
    """Same method as kiln_bench --memory: VmHWM growth of the first three steps, VmRSS after
    step 10 and after the last step (PyTorch's CPU allocator keeps no statistics)."""
    step = make_trainer(model, 4 if smoke else 64)
    p = f"mem/{model}/"
    rss0 = proc_status_bytes("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    for _ in range(3):
        loss = step()
    emit(p + "step_peak_rss", 1, proc_status_bytes("VmHWM") - rss0)
    steps = max(steps, 11)
    rss10 = 0.0
    for i in range(3, steps):
        loss = step()
        if i + 1 == 10:
            rss10 = proc_status_bytes("VmRSS")
    emit(p + "rss_step10", 1, rss10)
    emit(p + "rss_last", steps, proc_status_bytes("VmRSS"))
    emit(p + "loss_last", steps, loss.item() * 1e6)


if __name__ == "__main__":
    main()
