// kernel saxpy []
@group(0) @binding(0) var<storage, read> b0: array<f32>;
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
struct Params { p0: f32, p1: i32 }
@group(0) @binding(2) var<uniform> kk_p: Params;
@compute @workgroup_size(64, 1, 1)
fn main(@builtin(local_invocation_id) kk_lid: vec3<u32>, @builtin(workgroup_id) kk_wid: vec3<u32>,
        @builtin(num_workgroups) kk_nwg: vec3<u32>) {
  let v0: i32 = (i32(kk_wid.x) * 64i);
  let v1: i32 = (v0 + i32(kk_lid.x));
  let v2: bool = (v1 < kk_p.p1);
  if (v2) {
    let v3: f32 = b0[v1];
    let v4: f32 = b1[v1];
    let v5: f32 = (kk_p.p0 * v3);
    let v6: f32 = (v5 + v4);
    b1[v1] = v6;
  }
}
