// SPDX-License-Identifier: MIT OR Apache-2.0
// The library's kernel functions (call_library in kernel/library.h): one kiln::kernel::Function
// per name and signature, made at its first call and kept for the process.
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kernel/library.h"

namespace kiln::kernel::lib {

Val call_library(std::string name, const std::vector<Val>& args,
                 const std::function<Val(const std::vector<Val>&)>& body) {
  return call_library(std::move(name), args, body, nullptr, nullptr);
}

Val call_library(std::string name, const std::vector<Val>& args, const Function::Body& body,
                 const Function::Body& guard, const Function::Body& fast) {
  std::vector<Type> params;
  for (const Val& a : args) {
    params.push_back(a.type);
    name += '_';
    name += type_name(a.type);
  }
  static std::mutex mu;
  static std::unordered_map<std::string, std::unique_ptr<Function>> functions;
  const Function* f = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::unique_ptr<Function>& slot = functions[name];
    if (!slot)
      slot = guard ? std::make_unique<Function>(name, std::move(params), body, guard, fast)
                   : std::make_unique<Function>(name, std::move(params), body);
    f = slot.get();
  }
  return f->call(args);
}

}  // namespace kiln::kernel::lib
