#!/usr/bin/env python3
"""Counts the ONNX op types of the libonnx-testdata cases (no onnx package needed: a tiny
protobuf wire reader). Usage: onnx_count_ops.py [data_dir]. Prints op, cases, opsets."""
import collections, os, sys

def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1
        r |= (c & 0x7F) << s; s += 7
        if c < 0x80: return r, i

def fields(b):
    i = 0
    while i < len(b):
        k, i = varint(b, i)
        f, w = k >> 3, k & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i + 8]; i += 8
        elif w == 5: v = b[i:i + 4]; i += 4
        elif w == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        else: raise ValueError("wire type %d" % w)
        yield f, v

def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/libonnx-testdata/data"
    for folder in ["node", "pytorch-converted", "pytorch-operator", "simple"]:
        d = os.path.join(root, folder)
        if not os.path.isdir(d): continue
        ops = collections.Counter(); opsets = collections.defaultdict(set)
        for case in sorted(os.listdir(d)):
            m = open(os.path.join(d, case, "model.onnx"), "rb").read()
            ver = 0; seen = set()
            for f, v in fields(m):
                if f == 8:
                    dom = b""; vv = 0
                    for g, x in fields(v):
                        if g == 1: dom = x
                        if g == 2: vv = x
                    if dom in (b"", b"ai.onnx"): ver = vv
                if f == 7:
                    for g, x in fields(v):
                        if g == 1:
                            for h, y in fields(x):
                                if h == 4: seen.add(y.decode())
            for o in seen:
                ops[o] += 1; opsets[o].add(ver)
        print("##", folder)
        for o, c in ops.most_common():
            print(o, c, sorted(opsets[o]))

main()
