#version 450
// kernel count_bits []
layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { uint d[]; } b0;
layout(std430, set = 0, binding = 1) buffer B1 { uint d[]; } b1;
void main() {
  uint l0;
  uint l1;
  int v0 = (int(gl_WorkGroupID.x) * 32);
  int v1 = (v0 + int(gl_LocalInvocationID.x));
  uint v2 = b0.d[v1];
  l0 = v2;
  l1 = 0u;
  while (true) {
    uint v3 = l0;
    bool v4 = (v3 != 0u);
    if (!v4) { break; }
    uint v5 = l0;
    uint v6 = (v5 & 1u);
    uint v7 = l1;
    uint v8 = (v7 + v6);
    l1 = v8;
    uint v9 = l0;
    uint v10 = (v9 >> 1u);
    l0 = v10;
  }
  uint v11 = l1;
  uint v12 = atomicAdd(b1.d[0], v11);
}
