// SPDX-License-Identifier: MIT OR Apache-2.0
// Conformance registry of the fft family (cases: scripts/golden_cases/fft.py). Complex tensors
// are [..., 2] real tensors on both sides (torch.view_as_real).
#include "conformance/registry_util.h"

namespace kiln::conformance {
namespace {
using namespace reg;

std::string norm_of(At at) { return at.str_or("norm", "backward"); }
std::optional<Shape> s_of(At at) { return at.has("s") ? std::optional<Shape>(at.shape("s")) : std::nullopt; }
std::optional<Dims> dims_of(At at) { return at.has("dim") ? std::optional<Dims>(at.dims("dim")) : std::nullopt; }
Dims dims2(At at) { return at.has("dim") ? at.dims("dim") : Dims{-2, -1}; }

const RegistryPart part({
    OP(fft_fft) { return {fft::fft(in[0].t, at.opt_i("n"), at.i_or("dim", -1), norm_of(at))};
}  // namespace
END, OP(fft_ifft) { return {fft::ifft(in[0].t, at.opt_i("n"), at.i_or("dim", -1), norm_of(at))}; }
END, OP(fft_rfft) { return {fft::rfft(in[0].t, at.opt_i("n"), at.i_or("dim", -1), norm_of(at))}; }
END, OP(fft_irfft) { return {fft::irfft(in[0].t, at.opt_i("n"), at.i_or("dim", -1), norm_of(at))}; }
END, OP(fft_hfft) { return {fft::hfft(in[0].t, at.opt_i("n"), at.i_or("dim", -1), norm_of(at))}; }
END, OP(fft_ihfft) { return {fft::ihfft(in[0].t, at.opt_i("n"), at.i_or("dim", -1), norm_of(at))}; }
END, OP(fft_fft2) { return {fft::fft2(in[0].t, s_of(at), dims2(at), norm_of(at))}; }
END, OP(fft_ifft2) { return {fft::ifft2(in[0].t, s_of(at), dims2(at), norm_of(at))}; }
END, OP(fft_rfft2) { return {fft::rfft2(in[0].t, s_of(at), dims2(at), norm_of(at))}; }
END, OP(fft_irfft2) { return {fft::irfft2(in[0].t, s_of(at), dims2(at), norm_of(at))}; }
END, OP(fft_fftn) { return {fft::fftn(in[0].t, s_of(at), dims_of(at), norm_of(at))}; }
END, OP(fft_ifftn) { return {fft::ifftn(in[0].t, s_of(at), dims_of(at), norm_of(at))}; }
END, OP(fft_rfftn) { return {fft::rfftn(in[0].t, s_of(at), dims_of(at), norm_of(at))}; }
END, OP(fft_irfftn) { return {fft::irfftn(in[0].t, s_of(at), dims_of(at), norm_of(at))}; }
END, OP(fft_fftfreq) { return {fft::fftfreq(at.i("n"), at.f_or("d", 1.0), opts(at, dev))}; }
END, OP(fft_rfftfreq) { return {fft::rfftfreq(at.i("n"), at.f_or("d", 1.0), opts(at, dev))}; }
END, OP(fft_fftshift) { return {fft::fftshift(in[0].t, dims_of(at))}; }
END, OP(fft_ifftshift) { return {fft::ifftshift(in[0].t, dims_of(at))}; }
END, OP(hann_window) { return {hann_window(at.i("n"), at.b("periodic", true), opts(at, dev))}; }
END, OP(hamming_window) {
  return {
      hamming_window(at.i("n"), at.b("periodic", true), at.f_or("alpha", 0.54), at.f_or("beta", 0.46), opts(at, dev))};
}
END, OP(blackman_window) { return {blackman_window(at.i("n"), at.b("periodic", true), opts(at, dev))}; }
END, OP(stft) {
  return {stft(in[0].t, at.i("n_fft"),
               {.hop_length = at.opt_i("hop"),
                .win_length = at.opt_i("win"),
                .window = in[1].t,
                .center = at.b("center", true),
                .pad_mode = at.str_or("pad_mode", "reflect"),
                .normalized = at.b("normalized", false),
                .onesided = at.b("onesided", true)})};
}
END, OP(istft) {
  std::optional<bool> onesided;
  if (at.has("onesided")) onesided = at.b("onesided");
  return {istft(in[0].t, at.i("n_fft"),
                {.hop_length = at.opt_i("hop"),
                 .win_length = at.opt_i("win"),
                 .window = in[1].t,
                 .center = at.b("center", true),
                 .normalized = at.b("normalized", false),
                 .onesided = onesided,
                 .length = at.opt_i("length")})};
}
END,
}  // namespace kiln::conformance
);

}  // namespace
}  // namespace kiln::conformance
