#version 450
// kernel saxpy []
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float d[]; } b0;
layout(std430, set = 0, binding = 1) buffer B1 { float d[]; } b1;
layout(push_constant) uniform P { float p0; int p1; } kk_p;
void main() {
  int v0 = (int(gl_WorkGroupID.x) * 64);
  int v1 = (v0 + int(gl_LocalInvocationID.x));
  bool v2 = (v1 < kk_p.p1);
  if (v2) {
    precise float v3 = b0.d[v1];
    precise float v4 = b1.d[v1];
    precise float v5 = (kk_p.p0 * v3);
    precise float v6 = (v5 + v4);
    b1.d[v1] = v6;
  }
}
