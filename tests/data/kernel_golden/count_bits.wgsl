// kernel count_bits []
@group(0) @binding(0) var<storage, read> b0: array<u32>;
@group(0) @binding(1) var<storage, read_write> b1: array<atomic<u32>>;
@compute @workgroup_size(32, 1, 1)
fn main(@builtin(local_invocation_id) kk_lid: vec3<u32>, @builtin(workgroup_id) kk_wid: vec3<u32>,
        @builtin(num_workgroups) kk_nwg: vec3<u32>) {
  var l0: u32;
  var l1: u32;
  let v0: i32 = (i32(kk_wid.x) * 32i);
  let v1: i32 = (v0 + i32(kk_lid.x));
  let v2: u32 = b0[v1];
  l0 = v2;
  l1 = 0u;
  loop {
    let v3: u32 = l0;
    let v4: bool = (v3 != 0u);
    if (!v4) { break; }
    let v5: u32 = l0;
    let v6: u32 = (v5 & 1u);
    let v7: u32 = l1;
    let v8: u32 = (v7 + v6);
    l1 = v8;
    let v9: u32 = l0;
    let v10: u32 = (v9 >> 1u);
    l0 = v10;
  }
  let v11: u32 = l1;
  let v12: u32 = atomicAdd(&b1[0i], v11);
}
