// SPDX-License-Identifier: MIT OR Apache-2.0
// Bad-input suite, the rest of the public API: NN functional ops and losses, matrix products,
// linalg, FFT, autodiff, optimizers and schedulers, devices, store and ONNX. Each case must
// throw kiln::Error starting with the op's "[name]" where PyTorch raises (harness: bad_input.h).
#include <kiln/fft.h>
#include <kiln/linalg.h>
#include <kiln/nn.h>
#include <kiln/onnx.h>
#include <kiln/optim.h>
#include <kiln/store.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "test_paths.h"
#include "unit/bad_input.h"

using namespace kiln;
namespace F = kiln::nn::functional;
namespace fs = std::filesystem;
using kiln::test::bad::Case;
using kiln::test::bad::Env;
using kiln::test::bad::kAll;
using kiln::test::bad::kCpus;
using kiln::test::bad::kFused;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<Case> nn_ops() {
  return {
      CASE(conv2d_weight_rank, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 3, 3}))),
      CASE(conv2d_channel_mismatch, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 2, 3, 3}))),
      CASE(conv2d_groups_not_dividing, "conv2d", kAll,
           F::conv2d(e.f({1, 4, 8, 8}), e.f({3, 2, 3, 3}), {}, {.groups = 2})),
      CASE(conv2d_stride_zero, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 3, 3, 3}), {}, {.stride = 0})),
      CASE(conv2d_negative_padding, "conv2d", kAll,
           F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 3, 3, 3}), {}, {.padding = -1})),
      CASE(conv2d_dilation_zero, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 3, 3, 3}), {}, {.dilation = 0})),
      CASE(conv2d_kernel_too_big, "conv2d", kAll, F::conv2d(e.f({1, 3, 2, 2}), e.f({4, 3, 3, 3}))),
      CASE(conv2d_bias_size, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 3, 3, 3}), e.f({5}))),
      CASE(conv2d_dtype_mismatch, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}), e.f({4, 3, 3, 3}, f64))),
      CASE(conv2d_int_input, "conv2d", kAll, F::conv2d(e.f({1, 3, 8, 8}, i64), e.f({4, 3, 3, 3}, i64))),
      CASE(conv1d_input_rank, "conv1d", kAll, F::conv1d(e.f({1, 3, 8, 8}), e.f({4, 3, 3}))),
      CASE(conv3d_input_rank, "conv3d", kAll, F::conv3d(e.f({1, 3, 8}), e.f({4, 3, 3, 3, 3}))),
      CASE(conv_transpose2d_channels, "conv_transpose2d", kAll,
           F::conv_transpose2d(e.f({1, 3, 8, 8}), e.f({2, 4, 3, 3}))),
      CASE(unfold_kernel_too_big, "unfold", kAll, F::unfold(e.f({1, 2, 3, 3}), 5)),
      CASE(fold_block_count, "fold", kAll, F::fold(e.f({1, 4, 5}), {4, 4}, 2)),
      CASE(max_pool2d_kernel_zero, "max_pool2d", kAll, F::max_pool2d(e.f({1, 1, 4, 4}), 0)),
      CASE(max_pool2d_stride_zero, "max_pool2d", kAll, F::max_pool2d(e.f({1, 1, 4, 4}), 2, {.stride = 0})),
      CASE(max_pool2d_padding_too_big, "max_pool2d", kAll, F::max_pool2d(e.f({1, 1, 4, 4}), 2, {.padding = 2})),
      CASE(max_pool2d_rank, "max_pool2d", kAll, F::max_pool2d(e.f({4, 4}), 2)),
      CASE(max_pool1d_kernel_too_big, "max_pool1d", kAll, F::max_pool1d(e.f({1, 1, 3}), 5)),
      CASE(avg_pool2d_kernel_zero, "avg_pool2d", kAll, F::avg_pool2d(e.f({1, 1, 4, 4}), 0)),
      CASE(avg_pool2d_padding_too_big, "avg_pool2d", kAll, F::avg_pool2d(e.f({1, 1, 4, 4}), 2, {.padding = 3})),
      CASE(avg_pool2d_divisor_zero, "avg_pool2d", kAll, F::avg_pool2d(e.f({1, 1, 4, 4}), 2, {.divisor_override = 0})),
      CASE(adaptive_avg_pool2d_negative, "adaptive_avg_pool2d", kAll, F::adaptive_avg_pool2d(e.f({1, 1, 4, 4}), -1)),
      CASE(adaptive_max_pool2d_rank, "adaptive_max_pool2d", kAll, F::adaptive_max_pool2d(e.f({4}), 2)),
      CASE(max_unpool2d_indices_shape, "max_unpool2d", kAll,
           F::max_unpool2d(e.f({1, 1, 2, 2}), e.i({0, 1, 2}, {1, 1, 1, 3}), 2)),
      CASE(interpolate_no_size, "interpolate", kAll, F::interpolate(e.f({1, 1, 4, 4}), {})),
      CASE(interpolate_size_and_scale, "interpolate", kAll,
           F::interpolate(e.f({1, 1, 4, 4}), {.size = 8, .scale_factor = std::vector<double>{2.0}})),
      CASE(interpolate_bad_mode, "interpolate", kAll,
           F::interpolate(e.f({1, 1, 4, 4}), {.size = 8, .mode = "cubic-ish"})),
      CASE(grid_sample_grid_shape, "grid_sample", kAll, F::grid_sample(e.f({1, 1, 4, 4}), e.f({1, 2, 2, 3}))),
      CASE(affine_grid_theta_shape, "affine_grid", kAll, F::affine_grid(e.f({1, 3, 3}), {1, 1, 4, 4})),
      CASE(pixel_shuffle_channels, "pixel_shuffle", kAll, F::pixel_shuffle(e.f({1, 3, 2, 2}), 2)),
      CASE(pixel_unshuffle_size, "pixel_unshuffle", kAll, F::pixel_unshuffle(e.f({1, 1, 3, 3}), 2)),
      CASE(layer_norm_shape, "layer_norm", kAll, F::layer_norm(e.f({2, 3}), {4})),
      CASE(layer_norm_weight_shape, "layer_norm", kAll, F::layer_norm(e.f({2, 3}), {3}, e.f({4}))),
      CASE(rms_norm_shape, "rms_norm", kAll, F::rms_norm(e.f({2, 3}), {2})),
      CASE(group_norm_groups, "group_norm", kAll, F::group_norm(e.f({1, 6, 2}), 4)),
      CASE(batch_norm_running_mean_size, "batch_norm", kAll, F::batch_norm(e.f({2, 3}), e.f({4}), e.f({3}))),
      CASE(local_response_norm_size_zero, "local_response_norm", kAll, F::local_response_norm(e.f({1, 3, 4}), 0)),
      CASE(normalize_dim_out_of_range, "normalize", kAll, F::normalize(e.f({2, 3}), 2, 2)),
      CASE(sdpa_head_dim_mismatch, "scaled_dot_product_attention", kAll,
           F::scaled_dot_product_attention(e.f({1, 4, 8}), e.f({1, 4, 6}), e.f({1, 4, 8}))),
      CASE(sdpa_rank_1, "scaled_dot_product_attention", kAll,
           F::scaled_dot_product_attention(e.f({8}), e.f({8}), e.f({8}))),
      CASE(linear_weight_shape, "linear", kAll, F::linear(e.f({2, 3}), e.f({4, 5}))),
      CASE(mse_loss_shapes, "mse_loss", kAll, F::mse_loss(e.f({2, 3}), e.f({4}))),
      CASE(mse_loss_bad_reduction, "mse_loss", kAll, F::mse_loss(e.f({2}), e.f({2}), "avg")),
      CASE(huber_loss_negative_delta, "huber_loss", kAll, F::huber_loss(e.f({2}), e.f({2}), "mean", -1)),
      CASE(cross_entropy_target_too_big, "cross_entropy", kCpus,
           e.read(F::cross_entropy(e.f({2, 3}), e.i({0, 3}, {2})))),
      CASE(cross_entropy_target_rank, "cross_entropy", kAll, F::cross_entropy(e.f({2, 3}), e.i({0, 1, 2, 0}, {2, 2}))),
      CASE(nll_loss_target_too_big, "nll_loss", kCpus, e.read(F::nll_loss(e.f({2, 3}), e.i({5, 0}, {2})))),
      CASE(nll_loss_bad_reduction, "nll_loss", kAll, F::nll_loss(e.f({2, 3}), e.i({0, 0}, {2}), {.reduction = "avg"})),
      CASE(bce_shape, "binary_cross_entropy", kAll, F::binary_cross_entropy(e.f({2}) * 0.5, e.f({3}))),
      CASE(kl_div_bad_reduction, "kl_div", kAll, F::kl_div(e.f({2}), e.f({2}), "avg")),
      CASE(margin_ranking_shape, "margin_ranking_loss", kAll, F::margin_ranking_loss(e.f({2}), e.f({3}), e.f({2}))),
      CASE(cosine_embedding_shape, "cosine_embedding_loss", kAll,
           F::cosine_embedding_loss(e.f({2, 3}), e.f({2, 4}), e.f({2}))),
      CASE(triplet_margin_shape, "triplet_margin_loss", kAll,
           F::triplet_margin_loss(e.f({2, 3}), e.f({2, 3}), e.f({2, 4}))),
  };
}

std::vector<Case> matmul_linalg_fft() {
  return {
      CASE(matmul_inner_mismatch, "matmul", kAll, matmul(e.f({2, 3}), e.f({4, 5}))),
      CASE(matmul_vector_mismatch, "matmul", kAll, matmul(e.f({3}), e.f({4}))),
      CASE(matmul_0d, "matmul", kAll, matmul(e.f({}), e.f({3}))),
      CASE(matmul_batch_mismatch, "matmul", kAll, matmul(e.f({2, 2, 3}), e.f({3, 3, 4}))),
      CASE(mm_not_2d, "mm", kAll, mm(e.f({3}), e.f({3, 2}))),
      CASE(bmm_not_3d, "bmm", kAll, bmm(e.f({2, 3}), e.f({3, 2}))),
      CASE(bmm_batch_mismatch, "bmm", kAll, bmm(e.f({2, 2, 3}), e.f({3, 3, 2}))),
      CASE(mv_size_mismatch, "mv", kAll, mv(e.f({2, 3}), e.f({4}))),
      CASE(dot_size_mismatch, "dot", kAll, dot(e.f({3}), e.f({4}))),
      CASE(dot_2d, "dot", kAll, dot(e.f({2, 2}), e.f({2, 2}))),
      CASE(outer_2d, "outer", kAll, outer(e.f({2, 2}), e.f({2}))),
      CASE(addmm_input_shape, "addmm", kAll, addmm(e.f({5, 5}), e.f({2, 3}), e.f({3, 4}))),
      CASE(matmul_dtype_mismatch, "matmul", kAll, matmul(e.f({2, 2}), e.f({2, 2}, f64))),
      CASE(einsum_bad_equation, "einsum", kAll, einsum("ij,jk->i$", {e.f({2, 3}), e.f({3, 4})})),
      CASE(einsum_operand_count, "einsum", kAll, einsum("ij,jk->ik", {e.f({2, 3})})),
      CASE(einsum_rank_mismatch, "einsum", kAll, einsum("ijk->i", {e.f({2, 3})})),
      CASE(einsum_size_mismatch, "einsum", kAll, einsum("ij,jk->ik", {e.f({2, 3}), e.f({4, 4})})),
      CASE(inv_not_square, "linalg.inv", kAll, linalg::inv(e.f({2, 3}))),
      CASE(inv_1d, "linalg.inv", kAll, linalg::inv(e.f({3}))),
      CASE(inv_int, "linalg.inv", kAll, linalg::inv(e.f({2, 2}, i64))),
      CASE(inv_singular, "linalg.inv", kCpus, e.read(linalg::inv(e.f({2, 2})))),
      CASE(det_not_square, "linalg.det", kAll, linalg::det(e.f({2, 3}))),
      CASE(solve_shape_mismatch, "linalg.solve", kAll, linalg::solve(e.f({3, 3}), e.f({2}))),
      CASE(solve_singular, "linalg.solve", kCpus, e.read(linalg::solve(e.f({2, 2}), e.f({2})))),
      CASE(cholesky_not_square, "linalg.cholesky", kAll, linalg::cholesky(e.f({2, 3}))),
      CASE(cholesky_not_pd, "linalg.cholesky", kCpus, e.read(linalg::cholesky(-e.f({2, 2})))),
      CASE(solve_triangular_shape, "linalg.solve_triangular", kAll,
           linalg::solve_triangular(e.f({3, 3}), e.f({2, 2}), true)),
      CASE(eigvalsh_bad_uplo, "linalg.eigvalsh", kAll, linalg::eigvalsh(e.f({2, 2}), "X")),
      CASE(lstsq_rows_mismatch, "linalg.lstsq", kAll, linalg::lstsq(e.f({3, 2}), e.f({4, 1}))),
      CASE(matrix_power_not_square, "linalg.matrix_power", kAll, linalg::matrix_power(e.f({2, 3}), 2)),
      CASE(matrix_norm_bad_ord, "linalg.matrix_norm", kAll, linalg::matrix_norm(e.f({2, 2}), "frobenius")),
      CASE(matrix_norm_1d, "linalg.matrix_norm", kAll, linalg::matrix_norm(e.f({2}))),
      CASE(vector_norm_dim_out_of_range, "linalg.vector_norm", kAll, linalg::vector_norm(e.f({2}), 2, {3})),
      CASE(cross_not_3, "linalg.cross", kAll, linalg::cross(e.f({4}), e.f({4}))),
      CASE(trace_1d, "trace", kAll, trace(e.f({3}))),
      CASE(svdvals_1d, "linalg.svdvals", kAll, linalg::svdvals(e.f({3}))),
      CASE(pinv_1d, "linalg.pinv", kAll, linalg::pinv(e.f({3}))),
      CASE(fft_n_zero, "fft.fft", kAll, fft::fft(fft::to_complex(e.f({4})), 0)),
      CASE(fft_dim_out_of_range, "fft.fft", kAll, fft::fft(fft::to_complex(e.f({4})), {}, 2)),
      CASE(fft_bad_norm, "fft.fft", kAll, fft::fft(fft::to_complex(e.f({4})), {}, -1, "unit")),
      CASE(rfft_n_zero, "fft.rfft", kAll, fft::rfft(e.f({4}), 0)),
      CASE(irfft_n_zero, "fft.irfft", kAll, fft::irfft(fft::rfft(e.f({4})), 0)),
  };
}

std::vector<Case> autodiff_and_devices() {
  return {
      CASE(require_grad_int, "require_grad", kAll, e.f({2}, i64).to(e.dev.autodiff()).require_grad()),
      CASE(require_grad_no_autodiff, "require_grad", kAll, e.f({2}).require_grad()),
      CASE(require_grad_off_non_leaf, "require_grad", kAll,
           {
             Tensor x = e.f({2}).to(e.dev.autodiff()).require_grad();
             (x * 2).require_grad(false);
           }),
      CASE(require_grad_non_leaf, "require_grad", kAll,
           {
             Tensor x = e.f({2}).to(e.dev.autodiff()).require_grad();
             (x * 2).require_grad();
           }),
      CASE(backward_non_scalar, "backward", kAll,
           {
             Tensor x = e.f({2}).to(e.dev.autodiff()).require_grad();
             (x * 2).backward();
           }),
      CASE(backward_no_grad, "backward", kAll, e.f({}).to(e.dev.autodiff()).backward()),
      CASE(backward_seed_shape, "backward", kAll,
           {
             Tensor x = e.f({2}).to(e.dev.autodiff()).require_grad();
             (x * 2).backward(e.f({3}).to(e.dev.autodiff()));
           }),
      CASE(device_unknown_name, "Device", kFused, Device::from_string("tpu")),
      CASE(binary_across_devices, "add", kCpus, add(e.f({2}), ones({2}, {.device = Device::null()}))),
      CASE(item_of_many, "item", kAll, (void)e.f({3}).item<float>()),
      CASE(set_num_threads_zero, "set_num_threads", kFused, set_num_threads(0)),
  };
}

/// Optimizer and scheduler settings that torch.optim refuses with ValueError (Note [Optimizer
/// settings] in src/optim/optimizer.cpp).
std::vector<Case> optim_cases() {
  using namespace kiln::optim;
  using namespace kiln::optim::lr_scheduler;
#define OPT(name, op, ...) CASE(name, op, kAll, std::vector<Tensor> p{e.f({2})}; __VA_ARGS__)
  return {
    OPT(sgd_negative_lr, "SGD", SGD(p, {.lr = -0.1})), OPT(sgd_nan_lr, "SGD", SGD(p, {.lr = kNaN})),
        OPT(sgd_negative_momentum, "SGD", SGD(p, {.momentum = -0.9})),
        OPT(sgd_negative_weight_decay, "SGD", SGD(p, {.weight_decay = -1e-4})),
        OPT(sgd_nesterov_without_momentum, "SGD", SGD(p, {.nesterov = true})),
        OPT(sgd_nesterov_with_dampening, "SGD", SGD(p, {.momentum = 0.9, .dampening = 0.1, .nesterov = true})),
        OPT(sgd_group_negative_lr, "SGD", SGD(std::vector<ParamGroup>{{.params = p, .lr = -1.0}})),
        OPT(sgd_add_group_negative_wd, "SGD", SGD(p).add_param_group({.params = {e.f({1})}, .weight_decay = -1.0})),
        OPT(adam_negative_lr, "Adam", Adam(p, {.lr = -1e-3})),
        OPT(adam_beta1_one, "Adam", Adam(p, {.betas = {1.0, 0.999}})),
        OPT(adam_beta2_negative, "Adam", Adam(p, {.betas = {0.9, -0.1}})),
        OPT(adam_negative_eps, "Adam", Adam(p, {.eps = -1e-8})),
        OPT(adam_negative_weight_decay, "Adam", Adam(p, {.weight_decay = -1})),
        OPT(adamw_beta2_above_one, "AdamW", AdamW(p, {.betas = {0.9, 1.5}})),
        OPT(adamw_negative_lr, "AdamW", AdamW(p, {.lr = -1})),
        OPT(adagrad_negative_lr_decay, "Adagrad", Adagrad(p, {.lr_decay = -1})),
        OPT(adagrad_negative_initial, "Adagrad", Adagrad(p, {.initial_accumulator_value = -1})),
        OPT(adagrad_negative_eps, "Adagrad", Adagrad(p, {.eps = -1})),
        OPT(adadelta_rho_above_one, "Adadelta", Adadelta(p, {.rho = 1.5})),
        OPT(adadelta_negative_lr, "Adadelta", Adadelta(p, {.lr = -1})),
        OPT(rmsprop_negative_alpha, "RMSprop", RMSprop(p, {.alpha = -0.5})),
        OPT(rmsprop_negative_momentum, "RMSprop", RMSprop(p, {.momentum = -0.5})),
        OPT(rmsprop_negative_eps, "RMSprop", RMSprop(p, {.eps = -1})),
        OPT(adan_beta3_one, "Adan", Adan(p, {.betas = {0.98, 0.92, 1.0}})),
        OPT(adan_negative_weight_decay, "Adan", Adan(p, {.weight_decay = -0.1})),
        OPT(lion_beta_above_one, "Lion", Lion(p, {.betas = {1.1, 0.99}})),
        OPT(lion_negative_lr, "Lion", Lion(p, {.lr = -1})),
        OPT(muon_negative_momentum, "Muon", Muon(p, {.momentum = -0.5})),
        OPT(muon_ns_steps_too_many, "Muon", Muon(p, {.ns_steps = 1000})),
        OPT(muon_bad_adjust_lr_fn, "Muon", Muon(p, {.adjust_lr_fn = "bogus"})),
        OPT(muon_adam_beta_one, "Muon", Muon(p, {.adam_betas = {1.0, 0.999}})),
        OPT(lbfgs_negative_lr, "LBFGS", LBFGS(p, {.lr = -1})),
        OPT(lbfgs_zero_history, "LBFGS", LBFGS(p, {.history_size = 0})),
        OPT(lbfgs_bad_line_search, "LBFGS", LBFGS(p, {.line_search_fn = "armijo"})),
        OPT(lbfgs_step_without_closure, "LBFGS", LBFGS(p).step(Gradients())),
        CASE(clip_grad_norm_nonfinite, "clip_grad_norm_", kCpus,
             {
               Tensor q = e.f({2}).to(e.dev.autodiff()).require_grad();
               Gradients g = (q * kNaN).sum().backward();
               clip_grad_norm_(g, {q}, 1.0, 2, true);
             }),
        OPT(step_lr_step_size_zero, "StepLR", SGD opt(p); StepLR(opt, 0)),
        OPT(constant_lr_factor_above_one, "ConstantLR", SGD opt(p); ConstantLR(opt, 2.0)),
        OPT(linear_lr_start_zero, "LinearLR", SGD opt(p); LinearLR(opt, 0.0)),
        OPT(linear_lr_total_iters_zero, "LinearLR", SGD opt(p); LinearLR(opt, 0.5, 1.0, 0)),
        OPT(cosine_t_max_zero, "CosineAnnealingLR", SGD opt(p); CosineAnnealingLR(opt, 0)),
        OPT(warm_restarts_t0_zero, "CosineAnnealingWarmRestarts", SGD opt(p); CosineAnnealingWarmRestarts(opt, 0)),
        OPT(one_cycle_pct_start, "OneCycleLR", SGD opt(p);
            OneCycleLR(opt, {.max_lr = 0.1, .total_steps = 10, .pct_start = 1.5})),
        OPT(one_cycle_no_momentum, "OneCycleLR", Adagrad opt(p); OneCycleLR(opt, {.max_lr = 0.1, .total_steps = 10})),
        OPT(one_cycle_past_total, "OneCycleLR", SGD opt(p, {.momentum = 0.9});
            OneCycleLR s(opt, {.max_lr = 0.1, .total_steps = 1}); s.step(); s.step()),
        OPT(polynomial_total_iters_zero, "PolynomialLR", SGD opt(p); PolynomialLR(opt, 0)),
        OPT(lambda_lr_empty, "LambdaLR", SGD opt(p); LambdaLR(opt, nullptr)),
        OPT(noam_d_model_zero, "Noam", SGD opt(p); Noam(opt, 0, 10)),
        OPT(linear_warmup_null_inner, "LinearWarmup", SGD opt(p); LinearWarmup(opt, nullptr, 5)),
        OPT(plateau_factor_one, "ReduceLROnPlateau", SGD opt(p); ReduceLROnPlateau(opt, {.factor = 1.0})),
        OPT(plateau_bad_mode, "ReduceLROnPlateau", SGD opt(p); ReduceLROnPlateau(opt, {.mode = "mean"})),
        OPT(plateau_negative_patience, "ReduceLROnPlateau", SGD opt(p); ReduceLROnPlateau(opt, {.patience = -1})),
  };
#undef OPT
}

/// A fresh, empty folder under the test temp dir.
fs::path scratch(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / ("kiln_bad_input_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

const fs::path kFuzzCorpus = fs::path(KILN_GOLDEN_DIR) / ".." / "fuzz" / "corpus";

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<Case> store_and_onnx() {
  return {
      CASE(store_read_directory, "store.read", kFused, store::read(scratch("dir").string())),
      CASE(store_read_missing, "store.read", kFused, store::read((scratch("miss") / "none.safetensors").string())),
      CASE(store_read_empty_file, "store.read", kFused,
           {
             fs::path f = scratch("empty") / "e.safetensors";
             write_bytes(f, "");
             store::read(f.string());
           }),
      CASE(safetensors_load_directory, "safetensors", kFused, store::load_safetensors(scratch("dir2").string())),
      CASE(safetensors_header_too_long, "safetensors", kAll,
           {
             std::string b(8, '\xff');
             b += "{}";
             store::parse_safetensors(b.data(), b.size(), "x", e.dev);
           }),
      CASE(safetensors_bad_json, "safetensors", kAll,
           {
             std::string b = std::string("\x04\0\0\0\0\0\0\0", 8) + "{]x}";
             store::parse_safetensors(b.data(), b.size(), "x", e.dev);
           }),
      CASE(safetensors_offsets_past_end, "safetensors", kAll,
           {
             std::string h = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
             std::string b(8, '\0');
             b[0] = static_cast<char>(h.size());
             b += h + "1234";
             store::parse_safetensors(b.data(), b.size(), "x", e.dev);
           }),
      CASE(safetensors_shape_mismatch, "safetensors", kAll,
           {
             std::string h = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,4]}})";
             std::string b(8, '\0');
             b[0] = static_cast<char>(h.size());
             b += h + "1234";
             store::parse_safetensors(b.data(), b.size(), "x", e.dev);
           }),
      CASE(safetensors_save_to_directory, "store.write_atomic", kFused,
           store::save_safetensors(scratch("save_dir").string(), {{"w", ones({2})}})),
      CASE(safetensors_save_missing_parent, "store.write_atomic", kFused,
           store::save_safetensors((scratch("save_missing") / "no" / "w.safetensors").string(), {{"w", ones({2})}})),
      CASE(safetensors_save_empty_name, "safetensors", kFused,
           store::save_safetensors((scratch("save_name") / "w.safetensors").string(), {{"", ones({2})}})),
      CASE(torch_load_garbage, "load_torch", kFused,
           {
             fs::path f = scratch("torch") / "m.pt";
             write_bytes(f, "PK\x03\x04 not really a zip");
             store::load_torch(f.string());
           }),
      CASE(torch_load_directory, "load_torch", kFused, store::load_torch(scratch("torch_dir").string())),
      CASE(torch_parse_truncated_pickle, "load_torch", kFused,
           {
             std::string b("\x80\x02}q\x00(X", 7);
             store::parse_torch(b.data(), b.size(), "t.pt");
           }),
      CASE(module_load_shape_mismatch, "store::load", kFused,
           {
             nn::Linear lin({.in = 3, .out = 2}, e.dev);
             store::TensorMap m;
             m.tensors.emplace_back("weight", ones({5, 5}));
             m.tensors.emplace_back("bias", ones({2}));
             store::load(lin, m);
           }),
      CASE(module_load_missing_key_strict, "store::load", kFused,
           {
             nn::Linear lin({.in = 3, .out = 2}, e.dev);
             store::TensorMap m;
             m.tensors.emplace_back("weight", ones({2, 3}));
             store::load(lin, m);
           }),
      CASE(checkpoint_load_missing, "safetensors", kFused,
           {
             store::Checkpoint c;
             store::load_checkpoint((scratch("ckpt") / "none.ckpt").string(), c);
           }),
      CASE(onnx_empty_bytes, "onnx", kAll, onnx::Model::from_bytes("", e.dev)),
      CASE(onnx_garbage_bytes, "onnx", kAll, onnx::Model::from_bytes("\x08\x07\x12\xff\xff\xff", e.dev)),
      CASE(onnx_missing_file, "onnx", kFused, onnx::Model((scratch("onnx_miss") / "m.onnx").string(), e.dev)),
      CASE(onnx_directory, "onnx", kFused, onnx::Model(scratch("onnx_dir").string(), e.dev)),
      CASE(onnx_truncated_model, "onnx", kAll,
           {
             std::string b = read_bytes(kFuzzCorpus / "fuzz_onnx" / "conv.onnx");
             onnx::Model::from_bytes(std::string_view(b).substr(0, b.size() / 2), e.dev);
           }),
      CASE(onnx_run_wrong_input_count, "onnx", kAll,
           {
             std::string b = read_bytes(kFuzzCorpus / "fuzz_onnx" / "relu.onnx");
             onnx::Model::from_bytes(b, e.dev).run(std::vector<Tensor>{});
           }),
      CASE(onnx_run_undefined_input, "onnx", kAll,
           {
             std::string b = read_bytes(kFuzzCorpus / "fuzz_onnx" / "relu.onnx");
             onnx::Model::from_bytes(b, e.dev).run(std::vector<Tensor>{Tensor()});
           }),
  };
}

const std::vector<Case>& more_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> all;
    for (auto part : {nn_ops(), matmul_linalg_fft(), autodiff_and_devices(), optim_cases(), store_and_onnx()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return cases;
}

}  // namespace

KILN_BAD_INPUT_SUITE(BadInputMore, more_cases);

// A failed save leaves nothing behind: no file, no temporary.
TEST(BadInputStore, FailedSavesLeaveNothing) {
  fs::path d = scratch("leave_nothing");
  fs::create_directories(d / "target.safetensors");  // a directory where the file should go
  EXPECT_ANY_THROW(store::save_safetensors((d / "target.safetensors").string(), {{"w", ones({2})}}));
  EXPECT_ANY_THROW(store::save_safetensors((d / "w.safetensors").string(), {{"", ones({2})}}));
  EXPECT_ANY_THROW(store::save_safetensors((d / "w.safetensors").string(), {{"w", ones({2})}, {"w", ones({3})}}));
  std::vector<std::string> left;
  for (auto& entry : fs::directory_iterator(d)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"target.safetensors"});
  EXPECT_TRUE(fs::is_empty(d / "target.safetensors"));
}
