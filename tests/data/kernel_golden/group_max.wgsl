// kernel group_max []
@group(0) @binding(0) var<storage, read> b0: array<f32>;
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
var<workgroup> s0: array<f32, 4>;
@compute @workgroup_size(4, 1, 1)
fn main(@builtin(local_invocation_id) kk_lid: vec3<u32>, @builtin(workgroup_id) kk_wid: vec3<u32>,
        @builtin(num_workgroups) kk_nwg: vec3<u32>) {
  let v0: i32 = (i32(kk_wid.x) * 4i);
  let v1: i32 = (v0 + i32(kk_lid.x));
  let v2: f32 = b0[v1];
  s0[i32(kk_lid.x)] = v2;
  storageBarrier();
  workgroupBarrier();
  let v3: bool = (i32(kk_lid.x) < 2i);
  if (v3) {
    let v4: f32 = s0[i32(kk_lid.x)];
    let v5: i32 = (i32(kk_lid.x) + 2i);
    let v6: f32 = s0[v5];
    let v7: f32 = max(v4, v6);
    s0[i32(kk_lid.x)] = v7;
  }
  storageBarrier();
  workgroupBarrier();
  let v8: bool = (i32(kk_lid.x) < 1i);
  if (v8) {
    let v9: f32 = s0[i32(kk_lid.x)];
    let v10: i32 = (i32(kk_lid.x) + 1i);
    let v11: f32 = s0[v10];
    let v12: f32 = max(v9, v11);
    s0[i32(kk_lid.x)] = v12;
  }
  storageBarrier();
  workgroupBarrier();
  let v13: bool = (i32(kk_lid.x) == 0i);
  if (v13) {
    let v14: f32 = s0[0i];
    b1[i32(kk_wid.x)] = v14;
  }
}
