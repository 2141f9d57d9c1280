// A first look at Kiln tensors: creation, elementwise math, broadcasting, reductions, views,
// indexing and printing. Built with the examples: ./build/release/examples/tensor-basics/tensor-basics
#include <kiln/kiln.h>

#include <cstdio>
#include <iostream>

/// The example; main reports a kiln::Error it raises.
int run() {
  using namespace kiln;
  manual_seed(0);
  Device cpu = Device::cpu();

  // Creation and elementwise math with broadcasting.
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3}, cpu);
  Tensor b = randn({3, 4}, {.dtype = f32, .device = cpu});
  Tensor c = (a.exp() + 1).softmax(-1).sum({0}, /*keepdim=*/true);
  std::vector<float> v = c.to_vector<float>();
  std::cout << "a =\n" << a << "\n";
  std::cout << "b =\n" << b << "\n";
  std::cout << "softmax(exp(a) + 1).sum(0, keepdim) =\n" << c << "\n";
  std::cout << "as a vector: " << v[0] << ", " << v[1] << ", " << v[2] << "\n\n";

  // Views share storage; contiguous() copies when needed.
  Tensor t = a.t();
  std::cout << "a.t() is a view: " << std::boolalpha << t.is_same_storage(a) << ", contiguous: " << t.is_contiguous()
            << "\n";
  std::cout << "a[:, 1:] =\n" << a.index({Slice{}, Slice{1, std::nullopt}}) << "\n";

  // Reductions, sorting and indexing.
  auto [values, indices] = topk(b.flatten(), 3);
  std::cout << "top 3 of b: " << values << " at " << indices << "\n";
  std::cout << "b.mean(dim 1) = " << b.mean({1}) << "\n";
  std::cout << "argmax over b's columns: " << b.argmax(1) << "\n";
  Tensor mask = b > 0;
  std::cout << "positive entries of b: " << masked_select(b, mask).numel() << " of " << b.numel() << "\n";

  // Type promotion as in PyTorch.
  Tensor i = arange(6).reshape({2, 3});
  std::cout << "i64 + 0.5 -> " << dtype_name(((i + 0.5)).dtype()) << ", i64 / 2 -> " << dtype_name((i / 2).dtype())
            << "\n";

  // Errors name the op and the shapes.
  try {
    Tensor bad = a + b;
  } catch (const Error& e) {
    std::cout << "error: " << e.what() << "\n";
  }
  MemoryStats m = memory_stats(cpu);
  std::cout << "cpu memory in use: " << m.in_use << " bytes, peak " << m.peak << " bytes\n";
  return 0;
}

// An uncaught kiln::Error would end in std::terminate: print its message and exit 1 instead.
int main() {
  try {
    return run();
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
