// SPDX-License-Identifier: MIT OR Apache-2.0
// The tracer's side of kiln::kernel::Function (function.cpp): tracing a body, recording a call.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kernel.h"

namespace kiln::kernel::detail {

/// Traces body over symbolic parameters of these types into an optimised ir::Function; errors
/// are kiln::Error("[function 'name'] ..."). `bool_result`: the body returns a bool (a fast
/// form's guard), not a number.
std::shared_ptr<ir::Function> trace_function(const std::string& name, const std::vector<Type>& params,
                                             const std::function<Val(const std::vector<Val>&)>& body,
                                             bool bool_result = false);
/// Records a call of f with these arguments in the kernel being traced; its value.
Val emit_call(const std::shared_ptr<const ir::Function>& f, const std::vector<Val>& args);

}  // namespace kiln::kernel::detail
