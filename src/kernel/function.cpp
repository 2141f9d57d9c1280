// SPDX-License-Identifier: MIT OR Apache-2.0
// kiln::kernel::Function: a body traced once per process (detail::trace_function, in
// trace.cpp), called from kernels (detail::emit_call).
#include "kernel/function.h"

#include <algorithm>
#include <mutex>

#include "kernel/ir.h"

namespace kiln::kernel {

struct Function::State {
  std::string name;
  std::vector<Type> params;
  Body body, guard, fast;
  std::mutex mu;  // guards fn (the body is traced outside it: no lock is held while tracing)
  std::shared_ptr<const ir::Function> fn;
};

Function::Function(std::string name, std::vector<Type> params, Body body, Body guard, Body fast)
    : Function(std::move(name), std::move(params), std::move(body)) {
  if (!guard || !fast) throw Error("[function '" + s_->name + "'] a fast form needs a guard and a fast body");
  s_->guard = std::move(guard);
  s_->fast = std::move(fast);
}

Function::Function(std::string name, std::vector<Type> params, Body body) : s_(std::make_shared<State>()) {
  if (name.empty()) throw Error("[function] a function needs a name");
  if (params.size() > 5)
    throw Error("[function '" + name + "'] takes at most 5 parameters, not " + std::to_string(params.size()));
  if (!body) throw Error("[function '" + name + "'] has no body");
  s_->name = std::move(name);
  s_->params = std::move(params);
  s_->body = std::move(body);
}

const std::string& Function::name() const { return s_->name; }
Type Function::param(size_t i) const { return i < s_->params.size() ? s_->params[i] : Type::F32; }

const std::shared_ptr<const ir::Function>& Function::ir() const {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->fn) return s_->fn;  // set once, never changed
  }
  // The functions this thread is tracing: a body that reaches its own function again fails.
  thread_local std::vector<const State*> tracing;
  if (std::find(tracing.begin(), tracing.end(), s_.get()) != tracing.end())
    throw Error("[function '" + s_->name + "'] calls itself");
  tracing.push_back(s_.get());
  std::shared_ptr<const ir::Function> fn;
  try {
    fn = trace();
  } catch (...) {
    tracing.pop_back();
    throw;
  }
  tracing.pop_back();
  std::lock_guard<std::mutex> lock(s_->mu);
  if (!s_->fn) s_->fn = std::move(fn);  // two threads may both trace it; the first one is kept
  return s_->fn;
}

std::shared_ptr<const ir::Function> Function::trace() const {
  std::shared_ptr<ir::Function> fn = detail::trace_function(s_->name, s_->params, s_->body);
  if (!s_->guard) return fn;
  auto guard = detail::trace_function(s_->name + "_guard", s_->params, s_->guard, true);
  auto fast = detail::trace_function(s_->name + "_fast", s_->params, s_->fast);
  if (fast->result != fn->result)
    throw Error("[function '" + s_->name + "'] the fast form returns " + std::string(type_name(fast->result)) +
                ", the body " + std::string(type_name(fn->result)));
  fn->uses |= guard->uses;  // what the preludes need covers the fast form too
  fn->uses |= fast->uses;
  fn->guard = std::move(guard);
  fn->fast = std::move(fast);
  return fn;
}

Val Function::call(const std::vector<Val>& args) const { return detail::emit_call(ir(), args); }

}  // namespace kiln::kernel
