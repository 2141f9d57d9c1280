// SPDX-License-Identifier: MIT OR Apache-2.0
// A stand-in for the CUDA driver (built as libcuda.so.1, found through LD_LIBRARY_PATH by the
// kernel_cuda_mock test): the entry points Kiln's CUDA launcher uses, over host memory, with
// a record of what they were given. It cannot run a kernel: a launch writes a pattern into
// every buffer it is given (byte k + 1 into the k-th parameter's memory), so the test sees
// which buffers the launcher copies back. kiln_mock_state() exposes the record;
// kiln_mock_fail() makes one entry point fail once with a given code.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

struct State {
  int launches = 0;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  int params = 0;                ///< parameters the test said the kernel takes
  int buffer_params = 0;         ///< of them, device pointers this mock handed out
  unsigned char scalars[16][8];  ///< the other parameters' first 8 bytes, in order
  int scalar_count = 0;
  int live = 0;        ///< allocations not freed
  int to_device = 0;   ///< HtoD copies
  int to_host = 0;     ///< DtoH copies
  bool elf = false;    ///< the last module image was an ELF file (a CUBIN)
  char function[128];  ///< the last function looked up
};
State state;
std::map<uint64_t, size_t> allocations;
std::string fail_call;
int fail_code = 0;

int failing(const char* call) {
  if (fail_call != call) return 0;
  fail_call.clear();
  return fail_code;
}

}  // namespace

extern "C" {

State* kiln_mock_state() { return &state; }
void kiln_mock_reset(int params) {
  state = State{};
  state.params = params;
}
void kiln_mock_fail(const char* call, int code) {
  fail_call = call;
  fail_code = code;
}

int cuInit(unsigned) { return 0; }
// NVRTC looks for the driver's private export tables when a libcuda is loaded: none here.
int cuGetExportTable(const void** table, const void*) {
  *table = nullptr;
  return 500;  // CUDA_ERROR_NOT_FOUND
}
int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
int cuDeviceGet(int* d, int i) {
  *d = i;
  return 0;
}
int cuDeviceGetName(char* s, int n, int) {
  std::snprintf(s, static_cast<size_t>(n), "Kiln mock GPU");
  return 0;
}
int cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 1:  // max threads per block
      *v = 1024;
      return 0;
    case 6:  // max grid y
      *v = 65535;
      return 0;
    case 8:  // max shared memory per block
      *v = 49152;
      return 0;
    case 75:  // compute capability
      *v = 8;
      return 0;
    case 76:
      *v = 0;
      return 0;
    default:
      return 1;  // CUDA_ERROR_INVALID_VALUE
  }
}
int cuDevicePrimaryCtxRetain(void** c, int) {
  *c = &state;
  return 0;
}
int cuCtxSetCurrent(void*) { return 0; }
int cuModuleLoadData(void** m, const void* image) {
  if (int rc = failing("cuModuleLoadData")) return rc;
  state.elf = std::memcmp(image,
                          "\x7f"
                          "ELF",
                          4) == 0;
  *m = &state;
  return state.elf ? 0 : 200;  // CUDA_ERROR_INVALID_IMAGE
}
int cuModuleGetFunction(void** f, void*, const char* name) {
  std::snprintf(state.function, sizeof state.function, "%s", name);
  *f = &state;
  return 0;
}
int cuMemAlloc_v2(uint64_t* p, size_t n) {
  if (int rc = failing("cuMemAlloc")) return rc;
  void* q = std::malloc(n);
  if (!q) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  *p = reinterpret_cast<uint64_t>(q);
  allocations[*p] = n;
  ++state.live;
  return 0;
}
int cuMemFree_v2(uint64_t p) {
  if (!allocations.erase(p)) return 1;
  std::free(reinterpret_cast<void*>(p));
  --state.live;
  return 0;
}
int cuMemcpyHtoD_v2(uint64_t d, const void* h, size_t n) {
  ++state.to_device;
  std::memcpy(reinterpret_cast<void*>(d), h, n);
  return 0;
}
int cuMemcpyDtoH_v2(void* h, uint64_t d, size_t n) {
  ++state.to_host;
  std::memcpy(h, reinterpret_cast<void*>(d), n);
  return 0;
}
int cuLaunchKernel(void*, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned, void*,
                   void** params, void**) {
  if (int rc = failing("cuLaunchKernel")) return rc;
  ++state.launches;
  const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
  std::memcpy(state.grid, g, sizeof g);
  std::memcpy(state.block, b, sizeof b);
  state.buffer_params = state.scalar_count = 0;
  for (int k = 0; k < state.params; ++k) {
    uint64_t v = 0;
    std::memcpy(&v, params[k], sizeof v);
    if (auto it = allocations.find(v); it != allocations.end()) {
      std::memset(reinterpret_cast<void*>(v), k + 1, it->second);
      ++state.buffer_params;
    } else if (state.scalar_count < 16) {
      std::memcpy(state.scalars[state.scalar_count++], params[k], 8);
    }
  }
  return 0;
}
int cuCtxSynchronize() { return failing("cuCtxSynchronize"); }
int cuGetErrorString(int rc, const char** s) {
  *s = rc == 700 ? "an illegal memory access (mock)" : "mock error";
  return 0;
}

}  // extern "C"
