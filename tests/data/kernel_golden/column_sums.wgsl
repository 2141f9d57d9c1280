// kernel column_sums []
@group(0) @binding(0) var<storage, read> b0: array<f32>;
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
struct Params { p0: i32 }
@group(0) @binding(2) var<uniform> kk_p: Params;
@compute @workgroup_size(8, 1, 1)
fn main(@builtin(local_invocation_id) kk_lid: vec3<u32>, @builtin(workgroup_id) kk_wid: vec3<u32>,
        @builtin(num_workgroups) kk_nwg: vec3<u32>) {
  var l0: f32;
  l0 = 0.0f;
  for (var v0: i32 = 0i; v0 < kk_p.p0; v0 += 1i) {
    let v1: i32 = (v0 * 8i);
    let v2: i32 = (v1 + i32(kk_lid.x));
    let v3: f32 = b0[v2];
    let v4: f32 = l0;
    let v5: f32 = (v4 + v3);
    l0 = v5;
  }
  let v6: f32 = l0;
  b1[i32(kk_lid.x)] = v6;
}
