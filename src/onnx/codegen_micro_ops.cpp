// SPDX-License-Identifier: MIT OR Apache-2.0
// The micro target of ONNX code generation, part 3: the lowerings of ConvTranspose, Resize
// (and Upsample), Gather, Cast from integers, LayerNormalization, Erf, Slice, Split and LSTM (codegen_micro.h).
// Each adds kernel steps to the lowered model; what the kernels cannot run is refused with the
// reason, which the generator lists with the node.
#include <algorithm>
#include <cmath>

#include "kiln/error.h"
#include "onnx/codegen_micro.h"
#include "onnx/ops.h"

namespace kiln::onnx::micro {

namespace {

int32_t i32(int64_t v) { return static_cast<int32_t>(v); }

Step& add(const NodeView& v, Lowered& m, Step::Kind k, const std::string& out) {
  Step s;
  s.kind = k;
  s.what = v.what;
  s.out = out;
  m.steps.push_back(std::move(s));
  return m.steps.back();
}

// ---- ConvTranspose ----

std::string conv_transpose(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const Ints xs = dims_of(v.in[0]), ws = dims_of(v.in[1]), out = dims_of(v.outs[0]);
  if (xs.size() != 4 && xs.size() != 3) return "only 1-d and 2-d transposed convolutions are supported";
  const size_t r = xs.size() - 2;
  const Ints kernel(ws.begin() + 2, ws.end());
  const Ints strides = attr_ints(n, "strides", Ints(r, 1)), dil = attr_ints(n, "dilations", Ints(r, 1));
  const Ints pads = attr_ints(n, "pads", Ints(2 * r, 0)), opad = attr_ints(n, "output_padding", Ints(r, 0));
  const std::string ap = attr_s(n, "auto_pad", "NOTSET");
  const bool derived = n.attr("output_shape") != nullptr || ap == "SAME_UPPER" || ap == "SAME_LOWER";
  // Per spatial axis: stride, dilation, kernel, leading padding (the trailing one follows from out).
  int32_t s[2] = {1, 1}, d[2] = {1, 1}, k[2] = {1, 1}, pad[2] = {0, 0};
  for (size_t i = 0; i < r; ++i) {
    const size_t a = r == 1 ? 1 : i;
    s[a] = i32(strides[i]), d[a] = i32(dil[i]), k[a] = i32(kernel[i]);
    if (derived) {  // ONNX: the total padding that gives the output size, split by auto_pad
      const int64_t total = strides[i] * (xs[2 + i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1 - out[2 + i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
      pad[a] = i32(ap == "SAME_UPPER" ? half : total - half);
    } else if (ap != "VALID") {
      pad[a] = i32(pads[i]);
    }
  }
  Step& st = add(v, m, Step::ConvTranspose, n.output[0]);
  st.in = {n.input[0]};
  auto& c = st.convt;
  c.n = i32(xs[0]), c.c_in = i32(xs[1]), c.h = r == 1 ? 1 : i32(xs[2]), c.w = i32(xs.back());
  c.c_out = i32(out[1]), c.oh = r == 1 ? 1 : i32(out[2]), c.ow = i32(out.back());
  c.kh = k[0], c.kw = k[1], c.sh = s[0], c.sw = s[1], c.pt = pad[0], c.pl = pad[1], c.dh = d[0], c.dw = d[1];
  c.groups = i32(attr_i(n, "group", 1));
  st.w = floats(v.in[1]);
  if (v.in.size() > 2 && v.in[2].defined()) st.b = floats(v.in[2]);
  return "";
}

// ---- Resize ----

// The tables of one axis (in -> out elements; out_len and scale as the run-time op takes them):
// nearest (i0 only) or linear (i0, i1, the weight of i1), clamped to the input, by the run-time
// op's coordinate rules (ops_resize.cpp).
bool resize_axis(const NodeView& v, int64_t in, int64_t out, double out_len, double scale, std::vector<int32_t>& i0,
                 std::vector<int32_t>& i1, std::vector<float>& w, std::string& why) {
  const std::string mode = attr_s(v.n, "mode", "nearest");
  const bool old = v.opset < 11 || v.n.op_type == "Upsample";  // Resize-10 and Upsample: asymmetric
  const std::string ctm = old ? "asymmetric" : attr_s(v.n, "coordinate_transformation_mode", "half_pixel");
  const std::string nm = old ? "floor" : attr_s(v.n, "nearest_mode", "round_prefer_floor");
  if (ctm == "tf_crop_and_resize") {
    why = "coordinate_transformation_mode 'tf_crop_and_resize' is not supported";
    return false;
  }
  for (int64_t o = 0; o < out; ++o) {
    const double x = resize_original_coord(ctm, static_cast<double>(o), scale, in, out_len);
    if (mode == "nearest") {
      const int64_t r = std::clamp<int64_t>(resize_nearest_index(nm, x), 0, in - 1);
      i0.push_back(i32(r));
      i1.push_back(i32(r));
      w.push_back(0.0f);
    } else {
      const double c = std::clamp(x, 0.0, static_cast<double>(in - 1));
      const int64_t a = static_cast<int64_t>(std::floor(c));
      i0.push_back(i32(a));
      i1.push_back(i32(std::min(a + 1, in - 1)));
      w.push_back(static_cast<float>(c - static_cast<double>(a)));
    }
  }
  return true;
}

std::string resize(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const Ints xs = dims_of(v.in[0]), out = dims_of(v.outs[0]);
  const std::string mode = attr_s(n, "mode", "nearest");
  if (mode != "nearest" && mode != "linear") return "mode '" + mode + "' is not supported (nearest and linear are)";
  if (attr_i(n, "antialias", 0)) return "antialias is not supported";
  if (n.attr("axes")) return "the axes attribute is not supported";
  if (xs.size() < 3 || xs.size() > 4) return "only the last one or two dims of a 3-d or 4-d input resize";
  for (size_t i = 0; i + 2 < xs.size(); ++i)
    if (xs[i] != out[i]) return "only the spatial dims (the last one or two) may change size";
  // The scales the coordinates use: the scales input when given, else output / input sizes.
  const size_t scales_at = v.opset < 11 || n.op_type == "Upsample" ? 1 : 2;
  std::vector<float> scales;
  if (v.in.size() > scales_at && v.in[scales_at].defined() && v.in[scales_at].numel() > 0)
    scales = floats(v.in[scales_at]);
  if (const auto* a = n.attr("scales")) scales.assign(a->floats.begin(), a->floats.end());  // Upsample-7
  if (attr_s(n, "keep_aspect_ratio_policy", "stretch") != "stretch") return "keep_aspect_ratio_policy is not supported";
  if (!scales.empty() && scales.size() != xs.size()) return "scales must have one value per dim";
  // With scales: the scale and the fractional length in * scale; with sizes: out / in and out.
  auto scale_of = [&](size_t axis) {
    return scales.empty() ? static_cast<double>(out[axis]) / static_cast<double>(xs[axis])
                          : static_cast<double>(scales[axis]);
  };
  auto len_of = [&](size_t axis) {
    return scales.empty() ? static_cast<double>(out[axis]) : static_cast<double>(xs[axis]) * scales[axis];
  };
  Step& st = add(v, m, Step::Resize, n.output[0]);
  st.in = {n.input[0]};
  const bool two = xs.size() == 4;
  auto& p = st.resize;
  p.planes = i32(xs[0] * xs[1]), p.h = two ? i32(xs[2]) : 1, p.w = i32(xs.back());
  p.oh = two ? i32(out[2]) : 1, p.ow = i32(out.back()), p.linear = mode == "linear";
  st.tables.resize(4);
  std::string why;
  if (two) {
    if (!resize_axis(v, xs[2], out[2], len_of(2), scale_of(2), st.tables[0], st.tables[1], st.w, why)) return why;
  } else {
    st.tables[0] = st.tables[1] = {0};
    st.w = {0.0f};
  }
  const size_t last = xs.size() - 1;
  if (!resize_axis(v, xs[last], out[last], len_of(last), scale_of(last), st.tables[2], st.tables[3], st.b, why))
    return why;
  return "";
}

// ---- Gather, Cast, LayerNormalization, Erf ----

std::string gather(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const Ints xs = dims_of(v.in[0]);
  int64_t axis = attr_i(n, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(xs.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xs.size())) return "axis out of range";
  if (v.is_rt(1) && !m.int_type.count(n.input[1])) return "run-time indices must be an integer input or its view";
  Step& st = add(v, m, Step::Gather, n.output[0]);
  st.outer = i32(prod(xs, 0, axis));
  st.len = i32(xs[axis]);
  st.inner = i32(prod(xs, axis + 1));
  st.batch = i32(v.in[1].numel());
  if (v.is_rt(1)) {
    st.in = {n.input[1]};
  } else {  // constant indices, normalised here
    std::vector<int32_t> idx;
    for (int64_t i : cast(v.in[1], i64).contiguous().to_vector<int64_t>()) idx.push_back(i32(i < 0 ? i + xs[axis] : i));
    st.tables = {idx};
  }
  if (v.is_rt(0)) {
    st.in.insert(st.in.begin() + (v.is_rt(1) ? 1 : 0), n.input[0]);
  } else {
    st.w = floats(v.in[0]);
  }
  return "";
}

std::string layer_norm(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const Ints xs = dims_of(v.in[0]);
  int64_t axis = attr_i(n, "axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(xs.size());
  if (axis < 0 || axis >= static_cast<int64_t>(xs.size())) return "axis out of range";
  for (size_t i = 1; i < n.output.size(); ++i)
    if (!n.output[i].empty()) return "its Mean and InvStdDev outputs are not computed";
  const Ints norm(xs.begin() + axis, xs.end());
  Step& st = add(v, m, Step::LayerNorm, n.output[0]);
  st.in = {n.input[0]};
  st.inplace_ok = true;
  st.outer = i32(prod(xs, 0, axis));
  st.len = i32(prod(norm));
  st.alpha = attr_f(n, "epsilon", 1e-5f);
  st.w = floats(expand(cast(v.in[1], f32), to_shape(norm)));
  if (v.in.size() > 2 && v.in[2].defined()) st.b = floats(expand(cast(v.in[2], f32), to_shape(norm)));
  return "";
}

// ---- Slice and Split: strided views copied by the permute kernel ----

// A step copying the view of x (shape xs) with first element at `start` per dim and `step` per
// dim into an output of shape out.
std::string view(const NodeView& v, Lowered& m, const std::string& out_name, const Ints& xs, const Ints& start,
                 const Ints& step, const Ints& out) {
  const Ints st = contiguous_strides(xs);
  Step s;
  s.kind = Step::Permute;
  s.what = v.what;
  s.out = out_name;
  s.in = {v.n.input[0]};
  int64_t off = 0;
  for (size_t d = 0; d < xs.size(); ++d) off += start[d] * st[d];
  s.x_off = i32(off);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (s.perm.rank == 6) return "more than 6 dims of size above 1";
    s.perm.dims[s.perm.rank] = i32(out[d]);
    s.perm.x_str[s.perm.rank] = i32(st[d] * step[d]);
    ++s.perm.rank;
  }
  m.steps.push_back(std::move(s));
  return "";
}

std::string slice(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const Ints xs = dims_of(v.in[0]), out = dims_of(v.outs[0]);
  const int64_t r = static_cast<int64_t>(xs.size());
  auto input_ints = [&](size_t i, Ints def) {
    return i < v.in.size() && v.in[i].defined() ? cast(v.in[i], i64).contiguous().to_vector<int64_t>() : def;
  };
  Ints starts, axes, steps;
  if (v.opset < 10) {
    starts = attr_ints(n, "starts", {});
    axes = attr_ints(n, "axes", {});
  } else {
    starts = input_ints(1, {});
    axes = input_ints(3, {});
    steps = input_ints(4, {});
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  Ints start(xs.size(), 0), step(xs.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    const int64_t k = steps.empty() ? 1 : steps[i], dim = xs[a];
    int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
    b = k > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, 0, dim - 1);
    start[a] = out[a] > 0 ? b : 0;
    step[a] = k;
  }
  return view(v, m, n.output[0], xs, start, step, out);
}

std::string split(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const Ints xs = dims_of(v.in[0]);
  int64_t axis = attr_i(n, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(xs.size());
  int64_t at = 0;
  for (size_t i = 0; i < n.output.size() && i < v.outs.size(); ++i) {
    const Ints out = dims_of(v.outs[i]);
    if (!n.output[i].empty()) {
      Ints start(xs.size(), 0);
      start[axis] = at;
      const std::string why = view(v, m, n.output[i], xs, start, Ints(xs.size(), 1), out);
      if (!why.empty()) return why;
    }
    at += out[axis];
  }
  return "";
}

// ---- LSTM ----

std::string lstm(const NodeView& v, Lowered& m) {
  const auto& n = v.n;
  const int64_t layout = attr_i(n, "layout", 0);
  if (n.attr("activations")) return "activations other than the default are not supported";
  if (n.attr("clip")) return "clip is not supported";
  if (attr_i(n, "input_forget", 0)) return "input_forget is not supported";
  if (v.is_rt(1) || v.is_rt(2) || v.is_rt(3) || v.is_rt(4) || v.is_rt(7))
    return "W, R, B, sequence_lens and P must be constants";
  const Ints xs = dims_of(v.in[0]);
  const int64_t seq = xs[layout ? 1 : 0], batch = xs[layout ? 0 : 1], in = xs[2];
  if (v.in.size() > 4 && v.in[4].defined())
    for (int64_t l : cast(v.in[4], i64).to_vector<int64_t>())
      if (l != seq) return "sequence_lens shorter than the sequence are not supported";
  const std::string dir = attr_s(n, "direction", "forward");
  const int64_t nd = dir == "bidirectional" ? 2 : 1, H = attr_i(n, "hidden_size", 0), K = in + H, G = 4 * H;
  const std::vector<float> w = floats(v.in[1]), r = floats(v.in[2]);
  const bool has_b = v.in.size() > 3 && v.in[3].defined();
  const std::vector<float> b = has_b ? floats(v.in[3]) : std::vector<float>();
  // Outputs: Y, Y_h, Y_c (named here when the model leaves them out) and the scratch.
  const std::string base = n.output[0].empty() ? v.what : n.output[0];
  auto name = [&](size_t i, const char* tag, Ints shape) {
    std::string nm = i < n.output.size() && !n.output[i].empty() ? n.output[i] : base + "#" + tag;
    m.shape[nm] = std::move(shape);
    return nm;
  };
  const Ints y_shape = layout ? Ints{batch, seq, nd, H} : Ints{seq, nd, batch, H};
  const Ints state = layout ? Ints{batch, nd, H} : Ints{nd, batch, H};
  Step& st = add(v, m, Step::Lstm, name(0, "y", y_shape));
  const std::string scratch = base + "#scratch";  // the step's own: no graph value reads it
  m.shape[scratch] = {batch * (in + 5 * H)};
  st.more_out = {name(1, "h", state), name(2, "c", state), scratch};
  st.in = {n.input[0]};
  st.lstm = {i32(seq), i32(batch), i32(in), i32(H), i32(nd), 0, dir == "reverse", i32(layout)};
  if (v.in.size() > 7 && v.in[7].defined()) st.peep = floats(v.in[7]);
  for (int64_t d = 0; d < nd; ++d) {  // [W; R] of direction d transposed to [K, 4H], Wb + Rb
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < G; ++j) st.w.push_back(k < in ? w[(d * G + j) * in + k] : r[(d * G + j) * H + (k - in)]);
    for (int64_t j = 0; has_b && j < G; ++j) st.b.push_back(b[d * 2 * G + j] + b[d * 2 * G + G + j]);
  }
  for (size_t i : {size_t{5}, size_t{6}}) {
    if (i >= v.in.size() || !v.in[i].defined()) continue;
    if (v.is_rt(i)) {
      (i == 5 ? st.h0_in : st.c0_in) = static_cast<int>(st.in.size());
      st.in.push_back(n.input[i]);
    } else {
      (i == 5 ? st.h0 : st.c0) = floats(v.in[i]);
    }
  }
  return "";
}

}  // namespace

bool lower_more(const NodeView& v, Lowered& m, std::string& why) {
  const std::string& op = v.n.op_type;
  if (op == "ConvTranspose") {
    why = conv_transpose(v, m);
  } else if (op == "Resize" || op == "Upsample") {
    why = resize(v, m);
  } else if (op == "Gather") {
    why = gather(v, m);
  } else if (op == "Cast" && m.int_type.count(v.n.input[0])) {
    Step& st = add(v, m, Step::CastInt, v.n.output[0]);
    st.in = {v.n.input[0]};
  } else if (op == "LayerNormalization") {
    why = layer_norm(v, m);
  } else if (op == "Erf") {
    Step& st = add(v, m, Step::Unary, v.n.output[0]);
    st.in = {v.n.input[0]};
    st.unary = "erf";
    st.inplace_ok = true;
  } else if (op == "Slice") {
    why = slice(v, m);
  } else if (op == "Split") {
    why = split(v, m);
  } else if (op == "LSTM") {
    why = lstm(v, m);
  } else {
    return false;
  }
  return true;
}

}  // namespace kiln::onnx::micro
