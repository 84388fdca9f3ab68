// All-pairs N-body force step on float4 positions (after the CUDA samples' nbody / "Fast N-Body Simulation with CUDA")
#include <math.h>

#define SOFTENING 1e-9f

__device__ float3 bodyBodyInteraction(float4 bi, float4 bj, float3 ai) {
  float3 r;
  r.x = bj.x - bi.x;
  r.y = bj.y - bi.y;
  r.z = bj.z - bi.z;
  float distSqr = r.x * r.x + r.y * r.y + r.z * r.z + SOFTENING;
  float invDist = rsqrtf(distSqr);
  float invDist3 = invDist * invDist * invDist;
  float s = bj.w * invDist3;
  ai.x += r.x * s;
  ai.y += r.y * s;
  ai.z += r.z * s;
  return ai;
}

__global__ void integrateBodies(float4 *__restrict__ newPos, float4 *__restrict__ vel,
                                const float4 *__restrict__ oldPos, float deltaTime, int numBodies) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= numBodies) return;
  float4 p = oldPos[i];
  float3 acc = make_float3(0.0f, 0.0f, 0.0f);
  for (int j = 0; j < numBodies; j++) acc = bodyBodyInteraction(p, oldPos[j], acc);
  float4 v = vel[i];
  v.x += acc.x * deltaTime;
  v.y += acc.y * deltaTime;
  v.z += acc.z * deltaTime;
  p.x += v.x * deltaTime;
  p.y += v.y * deltaTime;
  p.z += v.z * deltaTime;
  newPos[i] = p;
  vel[i] = v;
}
