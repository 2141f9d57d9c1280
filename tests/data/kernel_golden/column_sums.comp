#version 450
// kernel column_sums []
layout(local_size_x = 8, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float d[]; } b0;
layout(std430, set = 0, binding = 1) writeonly buffer B1 { float d[]; } b1;
layout(push_constant) uniform P { int p0; } kk_p;
void main() {
  float l0;
  l0 = 0.0;
  for (int v0 = 0; v0 < kk_p.p0; v0 += 1) {
    int v1 = (v0 * 8);
    int v2 = (v1 + int(gl_LocalInvocationID.x));
    precise float v3 = b0.d[v2];
    precise float v4 = l0;
    precise float v5 = (v4 + v3);
    l0 = v5;
  }
  precise float v6 = l0;
  b1.d[int(gl_LocalInvocationID.x)] = v6;
}
