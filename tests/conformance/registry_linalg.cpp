// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry entries of kiln::linalg (cases in scripts/golden_cases/linalg.py).
#include <cmath>

#include "conformance/registry_util.h"

namespace kiln::conformance {
namespace {
using namespace reg;

/// A numeric norm order ("inf" and "-inf" included) or a string one ("fro", "nuc").
bool string_ord(At at) { return at.str("ord") == "fro" || at.str("ord") == "nuc"; }

const RegistryPart part({
    OP(linalg_inv) { return {kiln::linalg::inv(in[0].t)};
}  // namespace
END, OP(linalg_det) { return {kiln::linalg::det(in[0].t)}; }
END, OP(linalg_slogdet) {
  auto r = kiln::linalg::slogdet(in[0].t);
  return {r.sign, r.logabsdet};
}
END, OP(linalg_solve) { return {kiln::linalg::solve(in[0].t, in[1].t, at.b("left", true))}; }
END, OP(linalg_solve_triangular) {
  return {kiln::linalg::solve_triangular(in[0].t, in[1].t, at.b("upper"), at.b("left", true), at.b("unitriangular"))};
}
END, OP(linalg_cholesky) { return {kiln::linalg::cholesky(in[0].t, at.b("upper"))}; }
END, OP(linalg_lu_factor) {
  auto r = kiln::linalg::lu_factor(in[0].t);
  return {r.LU, r.pivots};
}
END, OP(linalg_qr) {
  auto r = kiln::linalg::qr(in[0].t, at.str_or("mode", "reduced"));
  return {r.Q, r.R};
}
END, OP(linalg_svdvals) { return {kiln::linalg::svdvals(in[0].t)}; }
END, OP(linalg_eigvalsh) { return {kiln::linalg::eigvalsh(in[0].t, at.str_or("UPLO", "L"))}; }
END, OP(linalg_lstsq) { return {kiln::linalg::lstsq(in[0].t, in[1].t)}; }
END, OP(linalg_pinv) { return {kiln::linalg::pinv(in[0].t, {.hermitian = at.b("hermitian")})}; }
END, OP(linalg_matrix_rank) { return {kiln::linalg::matrix_rank(in[0].t)}; }
END, OP(linalg_matrix_power) { return {kiln::linalg::matrix_power(in[0].t, at.i("n"))}; }
END, OP(linalg_matrix_norm) {
  Dims dim = at.has("dim") ? at.dims("dim") : Dims{-2, -1};
  bool keep = at.b("keepdim");
  if (string_ord(at)) return {kiln::linalg::matrix_norm(in[0].t, at.str("ord"), dim, keep)};
  return {kiln::linalg::matrix_norm(in[0].t, at.f("ord"), dim, keep)};
}
END, OP(linalg_vector_norm) {
  return {kiln::linalg::vector_norm(in[0].t, at.f("ord"), at.dims("dim"), at.b("keepdim"))};
}
END, OP(linalg_norm) {
  std::optional<Dims> dim;
  if (at.has("dim")) dim = at.dims("dim");
  bool keep = at.b("keepdim");
  if (!at.has("ord")) return {kiln::linalg::norm(in[0].t, std::nullopt, dim, keep)};
  if (string_ord(at)) return {kiln::linalg::norm(in[0].t, at.str("ord"), dim, keep)};
  return {kiln::linalg::norm(in[0].t, at.f("ord"), dim, keep)};
}
END, OP(linalg_cross) { return {kiln::linalg::cross(in[0].t, in[1].t, at.i_or("dim", -1))}; }
END, OP(trace) { return {kiln::trace(in[0].t)}; }
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
