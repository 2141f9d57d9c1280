// SPDX-License-Identifier: MIT OR Apache-2.0
// PNG (libpng) and JPEG (libjpeg) decoding and encoding, and the image-folder dataset.
//
// Note [setjmp]: both libraries report errors by calling a handler that must not return; ours
// longjmp back to the setjmp in a small function that holds no C++ object with a destructor
// (buffers live in the caller's frame, which longjmp does not skip). That function returns an
// error text and the caller throws kiln::Error, so no exception ever crosses C frames.
#include <cstddef>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cctype>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/io_util.h"
#include "kiln/data/sources.h"
#include "kiln/ops.h"

namespace kiln::data {

namespace {

// Largest decoded image accepted for an encoded size: deflate and JPEG cannot compress more
// than about 1000:1, so a header claiming more pixels than that is lying.
bool plausible_size(uint64_t decoded, size_t encoded) {
  return decoded <= (uint64_t{1} << 32) && decoded <= uint64_t{4096} * encoded + (uint64_t{16} << 20);
}

// HWC bytes -> u8 tensor [C, H, W].
Tensor hwc_to_tensor(const std::vector<uint8_t>& hwc, int h, int w, int c) {
  std::vector<uint8_t> chw(hwc.size());
  const size_t plane = static_cast<size_t>(h) * static_cast<size_t>(w);
  for (size_t p = 0; p < plane; ++p)
    for (int k = 0; k < c; ++k) chw[static_cast<size_t>(k) * plane + p] = hwc[p * static_cast<size_t>(c) + k];
  return from_blob_copy(chw.data(), Shape{c, h, w}, u8, Device::cpu());
}

// u8 [C, H, W] (other dtypes rounded and clamped) -> HWC bytes.
std::vector<uint8_t> tensor_to_hwc(const Tensor& image, const char* op, int& h, int& w, int& c) {
  KILN_CHECK(image.defined() && image.dim() == 3, op,
             "image must be [C, H, W], got " << (image.defined() ? image.shape() : Shape{}));
  c = static_cast<int>(image.size(0));
  h = static_cast<int>(image.size(1));
  w = static_cast<int>(image.size(2));
  KILN_CHECK(h > 0 && w > 0, op, "image must not be empty, got " << image.shape());
  Tensor t = image.dtype() == u8 ? image : image.round().clamp(0, 255).to(u8);
  std::vector<uint8_t> chw = t.to_vector<uint8_t>();
  std::vector<uint8_t> hwc(chw.size());
  const size_t plane = static_cast<size_t>(h) * static_cast<size_t>(w);
  for (size_t p = 0; p < plane; ++p)
    for (int k = 0; k < c; ++k) hwc[p * static_cast<size_t>(c) + k] = chw[static_cast<size_t>(k) * plane + p];
  return hwc;
}

// ---- PNG ---------------------------------------------------------------------------------------

struct PngIo {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char error[256];
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->error, sizeof io->error, "%s", msg ? msg : "libpng error");
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (n > io->size - io->pos) png_error(png, "truncated file (the data ends early)");
  std::memcpy(out, io->data + io->pos, n);
  io->pos += n;
}

// Returns nullptr on success, else the error text (in io->error). See Note [setjmp].
const char* png_decode_c(PngIo* io, std::vector<uint8_t>* pixels, int* h, int* w, int* c) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, io, png_on_error, png_on_warning);
  if (!png) return "out of memory";
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return "out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return io->error;
  }
  png_set_read_fn(png, io, png_read_mem);
  png_read_info(png, info);
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  const int channels = png_get_channels(png, info);
  const uint64_t bytes = uint64_t{width} * height * static_cast<uint64_t>(channels);
  if (width == 0 || height == 0 || !plausible_size(bytes, io->size)) {
    std::snprintf(io->error, sizeof io->error, "implausible image size %ux%u for a %zu-byte file", width, height,
                  io->size);
    png_destroy_read_struct(&png, &info, nullptr);
    return io->error;
  }
  if (png_get_rowbytes(png, info) != static_cast<size_t>(width) * static_cast<size_t>(channels)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return "unexpected row size after conversion to 8 bits";
  }
  pixels->resize(static_cast<size_t>(bytes));
  const int passes = png_set_interlace_handling(png);
  for (int p = 0; p < passes; ++p)
    for (png_uint_32 y = 0; y < height; ++y)
      png_read_row(png, pixels->data() + static_cast<size_t>(y) * width * static_cast<size_t>(channels), nullptr);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  *h = static_cast<int>(height);
  *w = static_cast<int>(width);
  *c = channels;
  return nullptr;
}

struct PngOut {
  std::FILE* f;
  char error[256];
};
void png_write_error(png_structp png, png_const_charp msg) {
  auto* o = static_cast<PngOut*>(png_get_error_ptr(png));
  std::snprintf(o->error, sizeof o->error, "%s", msg ? msg : "libpng error");
  png_longjmp(png, 1);
}

const char* png_encode_c(PngOut* out, const uint8_t* hwc, int h, int w, int c) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, out, png_write_error, png_on_warning);
  if (!png) return "out of memory";
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    return "out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return out->error;
  }
  png_init_io(png, out->f);
  const int types[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), 8, types[c], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y)
    png_write_row(png, hwc + static_cast<size_t>(y) * static_cast<size_t>(w) * static_cast<size_t>(c));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return nullptr;
}

// ---- JPEG --------------------------------------------------------------------------------------

struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char error[JMSG_LENGTH_MAX + 64];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErr*>(cinfo->err);
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  std::snprintf(e->error, sizeof e->error, "%s", buf);
  std::longjmp(e->jump, 1);
}
void jpeg_on_message(j_common_ptr, int) {}

const char* jpeg_decode_c(JpegErr* err, const uint8_t* data, size_t size, std::vector<uint8_t>* pixels, int* h, int* w,
                          int* c) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err->mgr);
  err->mgr.error_exit = jpeg_on_error;
  err->mgr.emit_message = jpeg_on_message;
  if (setjmp(err->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return err->error;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, const_cast<unsigned char*>(data), static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&cinfo);
    return "CMYK JPEG images are not supported";
  }
  cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const uint64_t bytes = uint64_t{cinfo.output_width} * cinfo.output_height * cinfo.output_components;
  if (bytes == 0 || !plausible_size(bytes, size)) {
    std::snprintf(err->error, sizeof err->error, "implausible image size %ux%u for a %zu-byte file", cinfo.output_width,
                  cinfo.output_height, size);
    jpeg_destroy_decompress(&cinfo);
    return err->error;
  }
  pixels->resize(static_cast<size_t>(bytes));
  const size_t stride = static_cast<size_t>(cinfo.output_width) * static_cast<size_t>(cinfo.output_components);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels->data() + static_cast<size_t>(cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  // A truncated file makes libjpeg warn and pad with grey; treat that as an error.
  const long warnings = err->mgr.num_warnings;
  jpeg_finish_decompress(&cinfo);
  *h = static_cast<int>(cinfo.output_height);
  *w = static_cast<int>(cinfo.output_width);
  *c = cinfo.output_components;
  jpeg_destroy_decompress(&cinfo);
  if (warnings > 0) return "corrupt or truncated data";
  return nullptr;
}

struct JpegOut {
  JpegErr err;
  std::FILE* f;
};

const char* jpeg_encode_c(JpegOut* out, const uint8_t* hwc, int h, int w, int c, int quality) {
  jpeg_compress_struct cinfo;
  cinfo.err = jpeg_std_error(&out->err.mgr);
  out->err.mgr.error_exit = jpeg_on_error;
  out->err.mgr.emit_message = jpeg_on_message;
  if (setjmp(out->err.jump)) {
    jpeg_destroy_compress(&cinfo);
    return out->err.error;
  }
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, out->f);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = c;
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(w) * static_cast<size_t>(c);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(hwc) + static_cast<size_t>(cinfo.next_scanline) * stride;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return nullptr;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

Tensor decode_png(const std::vector<uint8_t>& bytes, const std::string& name) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  KILN_CHECK(bytes.size() >= 8 && std::memcmp(bytes.data(), sig, 8) == 0, "data::decode_png",
             "'" << name << "': not a PNG file (bad signature)");
  PngIo io{bytes.data(), bytes.size(), 0, {0}};
  std::vector<uint8_t> pixels;
  int h = 0, w = 0, c = 0;
  const char* err = png_decode_c(&io, &pixels, &h, &w, &c);
  KILN_CHECK(err == nullptr, "data::decode_png", "'" << name << "': bad PNG: " << err);
  return hwc_to_tensor(pixels, h, w, c);
}

Tensor decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name) {
  KILN_CHECK(bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF, "data::decode_jpeg",
             "'" << name << "': not a JPEG file (bad signature)");
  JpegErr err{};
  std::vector<uint8_t> pixels;
  int h = 0, w = 0, c = 0;
  const char* msg = jpeg_decode_c(&err, bytes.data(), bytes.size(), &pixels, &h, &w, &c);
  KILN_CHECK(msg == nullptr, "data::decode_jpeg", "'" << name << "': bad JPEG: " << msg);
  return hwc_to_tensor(pixels, h, w, c);
}

Tensor read_image(const std::string& path) {
  io::check_not_directory(path, "data::read_image");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  KILN_CHECK(f != nullptr, "data::read_image", "cannot open '" << path << "': " << std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  std::fclose(f);
  if (bytes.size() >= 8 && bytes[0] == 0x89 && bytes[1] == 'P') return decode_png(bytes, path);
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8) return decode_jpeg(bytes, path);
  KILN_CHECK(false, "data::read_image", "'" << path << "': neither a PNG nor a JPEG file (unknown signature)");
  return {};
}

void write_png(const std::string& path, const Tensor& image) {
  int h, w, c;
  std::vector<uint8_t> hwc = tensor_to_hwc(image, "data::write_png", h, w, c);
  KILN_CHECK(c >= 1 && c <= 4, "data::write_png", "PNG images have 1 to 4 channels, got " << image.shape());
  PngOut out{std::fopen(path.c_str(), "wb"), {0}};
  KILN_CHECK(out.f != nullptr, "data::write_png", "cannot create '" << path << "': " << std::strerror(errno));
  const char* err = png_encode_c(&out, hwc.data(), h, w, c);
  bool closed = std::fclose(out.f) == 0;
  if (err || !closed) std::remove(path.c_str());
  KILN_CHECK(err == nullptr, "data::write_png", "'" << path << "': " << err);
  KILN_CHECK(closed, "data::write_png", "'" << path << "': write failed");
}

void write_jpeg(const std::string& path, const Tensor& image, int quality) {
  int h, w, c;
  std::vector<uint8_t> hwc = tensor_to_hwc(image, "data::write_jpeg", h, w, c);
  KILN_CHECK(c == 1 || c == 3, "data::write_jpeg", "JPEG images have 1 or 3 channels, got " << image.shape());
  KILN_CHECK(quality >= 1 && quality <= 100, "data::write_jpeg", "quality must lie in 1..100, got " << quality);
  JpegOut out{};
  out.f = std::fopen(path.c_str(), "wb");
  KILN_CHECK(out.f != nullptr, "data::write_jpeg", "cannot create '" << path << "': " << std::strerror(errno));
  const char* err = jpeg_encode_c(&out, hwc.data(), h, w, c, quality);
  bool closed = std::fclose(out.f) == 0;
  if (err || !closed) std::remove(path.c_str());
  KILN_CHECK(err == nullptr, "data::write_jpeg", "'" << path << "': " << err);
  KILN_CHECK(closed, "data::write_jpeg", "'" << path << "': write failed");
}

// ---- image folder --------------------------------------------------------------------------------

ImageFolderDataset::ImageFolderDataset(const std::string& root, const ImageFolderOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  KILN_CHECK(fs::is_directory(root, ec), "data::image_folder", "'" << root << "' is not a directory");
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory()) classes_.push_back(e.path().filename().string());
  KILN_CHECK(!ec, "data::image_folder", "cannot list '" << root << "': " << ec.message());
  std::sort(classes_.begin(), classes_.end());
  KILN_CHECK(!classes_.empty(), "data::image_folder",
             "'" << root << "' has no sub-folders (expected one sub-folder per class)");
  for (size_t k = 0; k < classes_.size(); ++k) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(fs::path(root) / classes_[k], ec)) {
      if (!e.is_regular_file()) continue;
      std::string ext = lower(e.path().extension().string());
      if (std::find(options.extensions.begin(), options.extensions.end(), ext) != options.extensions.end())
        files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      files_.push_back(std::move(f));
      labels_.push_back(static_cast<int64_t>(k));
    }
  }
}

ImageItem ImageFolderDataset::get(size_t i) const {
  detail::check_index(i, files_.size(), "data::image_folder");
  return {read_image(files_[i]), labels_[i]};
}

std::shared_ptr<ImageFolderDataset> image_folder(const std::string& root, const ImageFolderOptions& options) {
  return std::make_shared<ImageFolderDataset>(root, options);
}

}  // namespace kiln::data
