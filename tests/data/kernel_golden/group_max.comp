#version 450
// kernel group_max []
layout(local_size_x = 4, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float d[]; } b0;
layout(std430, set = 0, binding = 1) writeonly buffer B1 { float d[]; } b1;
shared float s0[4];
void main() {
  int v0 = (int(gl_WorkGroupID.x) * 4);
  int v1 = (v0 + int(gl_LocalInvocationID.x));
  precise float v2 = b0.d[v1];
  s0[int(gl_LocalInvocationID.x)] = v2;
  memoryBarrierShared();
  memoryBarrierBuffer();
  barrier();
  bool v3 = (int(gl_LocalInvocationID.x) < 2);
  if (v3) {
    precise float v4 = s0[int(gl_LocalInvocationID.x)];
    int v5 = (int(gl_LocalInvocationID.x) + 2);
    precise float v6 = s0[v5];
    precise float v7 = max(v4, v6);
    s0[int(gl_LocalInvocationID.x)] = v7;
  }
  memoryBarrierShared();
  memoryBarrierBuffer();
  barrier();
  bool v8 = (int(gl_LocalInvocationID.x) < 1);
  if (v8) {
    precise float v9 = s0[int(gl_LocalInvocationID.x)];
    int v10 = (int(gl_LocalInvocationID.x) + 1);
    precise float v11 = s0[v10];
    precise float v12 = max(v9, v11);
    s0[int(gl_LocalInvocationID.x)] = v12;
  }
  memoryBarrierShared();
  memoryBarrierBuffer();
  barrier();
  bool v13 = (int(gl_LocalInvocationID.x) == 0);
  if (v13) {
    precise float v14 = s0[0];
    b1.d[int(gl_WorkGroupID.x)] = v14;
  }
}
