// kernel softplus_call []
@group(0) @binding(0) var<storage, read> b0: array<f32>;
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
fn kk_f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }
fn kk_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn kk_f_exp_f32_f32(p0: f32) -> f32 {
  let v0: f32 = max(p0, -104.0f);
  let v1: f32 = min(v0, 89.0f);
  let v2: f32 = (v1 * 1.442695f);
  let v3: f32 = (v2 + 0.5f);
  let v4: f32 = floor(v3);
  let v5: f32 = (v4 * 0.6933594f);
  let v6: f32 = (v1 - v5);
  let v7: f32 = (v4 * -0.00021219444f);
  let v8: f32 = (v6 - v7);
  let v9: f32 = (0.00019875691f * v8);
  let v10: f32 = (v9 + 0.0013981999f);
  let v11: f32 = (v10 * v8);
  let v12: f32 = (v11 + 0.008333452f);
  let v13: f32 = (v12 * v8);
  let v14: f32 = (v13 + 0.041665796f);
  let v15: f32 = (v14 * v8);
  let v16: f32 = (v15 + 0.16666666f);
  let v17: f32 = (v16 * v8);
  let v18: f32 = (v17 + 0.5f);
  let v19: f32 = (v8 + 1.0f);
  let v20: f32 = (v8 * v8);
  let v21: f32 = (v18 * v20);
  let v22: f32 = (v21 + v19);
  let v23: i32 = i32(v4);
  let v24: i32 = (v23 >> u32(1i));
  let v25: i32 = (v23 - v24);
  let v26: i32 = (v24 + 127i);
  let v27: i32 = (v26 << u32(23i));
  let v28: f32 = bitcast<f32>(v27);
  let v29: i32 = (v25 + 127i);
  let v30: i32 = (v29 << u32(23i));
  let v31: f32 = bitcast<f32>(v30);
  let v32: f32 = (v22 * v28);
  let v33: f32 = (v32 * v31);
  let v34: bool = kk_isnan(f32(p0));
  let v35: f32 = select(v33, p0, v34);
  return v35;
}
fn kk_f_log_f32_f32(p0: f32) -> f32 {
  let v0: i32 = bitcast<i32>(p0);
  let v1: i32 = (v0 & 8388607i);
  let v2: i32 = (v0 & 2139095040i);
  let v3: bool = (v2 == 0i);
  let v4: bool = (v1 != 0i);
  let v5: bool = (v3 && v4);
  let v6: f32 = f32(v1);
  let v7: f32 = (v6 * 4.7019774e-38f);
  let v8: f32 = select(p0, v7, v5);
  let v9: i32 = bitcast<i32>(v8);
  let v10: i32 = (v9 + 4913933i);
  let v11: i32 = select(0i, -25i, v5);
  let v12: i32 = (v10 >> u32(23i));
  let v13: i32 = (v12 - 127i);
  let v14: i32 = (v13 + v11);
  let v15: f32 = f32(v14);
  let v16: i32 = (v10 & 8388607i);
  let v17: i32 = (v16 + 1060439283i);
  let v18: f32 = bitcast<f32>(v17);
  let v19: f32 = (v18 - 1.0f);
  let v20: f32 = (v18 + 1.0f);
  let v21: f32 = (v19 / v20);
  let v22: f32 = (v21 * v21);
  let v23: f32 = (v22 * v22);
  let v24: f32 = (v23 * 0.24279079f);
  let v25: f32 = (v24 + 0.40000972f);
  let v26: f32 = (v25 * v23);
  let v27: f32 = (v23 * 0.28498787f);
  let v28: f32 = (v27 + 0.6666666f);
  let v29: f32 = (v28 * v22);
  let v30: f32 = (v29 + v26);
  let v31: f32 = (v15 * 9.058001e-06f);
  let v32: f32 = (v19 - v30);
  let v33: f32 = (v21 * v32);
  let v34: f32 = (v33 - v31);
  let v35: f32 = (v34 - v19);
  let v36: f32 = (v15 * 0.6931381f);
  let v37: f32 = (v36 - v35);
  let v38: i32 = (v0 & 2147483647i);
  let v39: bool = (v38 == 0i);
  let v40: bool = (!kk_isnan(f32(p0)) && !kk_isnan(f32(kk_f32_bits(0x7f800000u))) && p0 == kk_f32_bits(0x7f800000u));
  let v41: f32 = select(v37, p0, v40);
  let v42: bool = (v0 < 0i);
  let v43: f32 = select(v41, kk_f32_bits(0x7fc00000u), v42);
  let v44: f32 = select(v43, kk_f32_bits(0xff800000u), v39);
  let v45: bool = kk_isnan(f32(p0));
  let v46: f32 = select(v44, p0, v45);
  return v46;
}
fn kk_f_golden_softplus(p0: f32, p1: f32) -> f32 {
  var l0: f32;
  let v0: f32 = (p0 * p1);
  l0 = v0;
  let v1: f32 = l0;
  let v2: f32 = kk_f_exp_f32_f32(v1);
  let v3: f32 = (1.0f + v2);
  let v4: f32 = kk_f_log_f32_f32(v3);
  let v5: f32 = (v4 / p1);
  l0 = v5;
  let v6: f32 = l0;
  return v6;
}
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(local_invocation_id) kk_lid: vec3<u32>, @builtin(workgroup_id) kk_wid: vec3<u32>,
        @builtin(num_workgroups) kk_nwg: vec3<u32>) {
  let v0: i32 = (i32(kk_wid.x) * 64i);
  let v1: i32 = (v0 + i32(kk_lid.x));
  let v2: f32 = b0[v1];
  let v3: f32 = kk_f_golden_softplus(v2, 2.0f);
  b1[v1] = v3;
}
