// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// Data sources: IDX files (MNIST, Fashion-MNIST), CSV files, image folders (PNG, JPEG) and
// SQLite tables. Broken or hostile files throw kiln::Error naming the file and the problem.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/data/dataset.h"
#include "kiln/tensor.h"

namespace kiln::data {

// ---- items ----------------------------------------------------------------------------------

/// An image with its class: image [C, H, W] (u8 in 0..255, or f32 in [0, 1]) on the CPU.
struct ImageItem {
  Tensor image;
  int64_t label = 0;
};

/// A row of a table: features [F] and targets [T] (f32 unless asked otherwise) on the CPU.
struct TabularItem {
  Tensor features;
  Tensor target;
};

// ---- IDX ------------------------------------------------------------------------------------

/// Reads an IDX file (raw or gzip-compressed; the MNIST format: magic 0,0,type,ndim, then
/// big-endian u32 dims, then the big-endian data) into a CPU tensor of its dtype (u8, i8, i16,
/// i32, f32, f64) and shape. Throws for a wrong magic, an unknown type, a truncated file or
/// data whose size does not match the dims.
Tensor read_idx(const std::string& path);

/// Options of idx_classification and fashion_mnist.
struct IdxOptions {
  /// u8 keeps the bytes (0..255); f32 scales them to [0, 1].
  DType dtype = u8;
};

/// Images [N, H, W] or [N, C, H, W] in u8 and labels [N] from two IDX files, held in memory.
class ImageClassificationDataset : public Dataset<ImageItem> {
 public:
  /// images: N*C*H*W bytes; labels: N values; `shape` is [C, H, W].
  ImageClassificationDataset(std::vector<uint8_t> images, std::vector<int64_t> labels, Shape shape, DType dtype);
  size_t size() const override { return labels_.size(); }
  /// Image i as [C, H, W] (u8 or f32 in [0, 1]) and its label.
  ImageItem get(size_t i) const override;
  /// [C, H, W] of every image.
  const Shape& image_shape() const { return shape_; }
  const std::vector<int64_t>& labels() const { return labels_; }
  /// Largest label + 1 (0 when empty).
  int64_t num_classes() const;

 private:
  std::vector<uint8_t> images_;
  std::vector<int64_t> labels_;
  Shape shape_;
  DType dtype_;
};

/// Loads images and labels from IDX files (the label count must equal the image count).
std::shared_ptr<ImageClassificationDataset> idx_classification(const std::string& images_path,
                                                               const std::string& labels_path,
                                                               const IdxOptions& options = {});

/// Where the `dataset-fashion-mnist` Debian package installs Fashion-MNIST.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// The MNIST or Fashion-MNIST split in `dir`: train=true reads train-{images-idx3,labels-idx1}-ubyte
/// (60000 items), false reads t10k-* (10000); a ".gz" file is used when present. Items are
/// [1, 28, 28] images with labels 0..9.
std::shared_ptr<ImageClassificationDataset> mnist(const std::string& dir, bool train, const IdxOptions& options = {});
/// mnist(kFashionMnistDir, train, options).
std::shared_ptr<ImageClassificationDataset> fashion_mnist(bool train, const IdxOptions& options = {});
/// The ten Fashion-MNIST class names, "T-shirt/top" ... "Ankle boot".
const std::vector<std::string>& fashion_mnist_classes();

// ---- tables: CSV and SQLite -----------------------------------------------------------------

/// Type of a table column.
enum class ColumnType : uint8_t {
  Infer,    ///< (CSV option only) Int64 if every value is an integer, else Float64 if every
            ///< value is a number, else String
  Int64,    ///< integers
  Float64,  ///< numbers; empty fields and SQL NULL read as NaN
  String,   ///< text
};
std::string to_string(ColumnType t);

/// One typed column: values in `ints`, `floats` or `strings` according to `type`.
struct Column {
  std::string name;
  ColumnType type = ColumnType::Float64;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  size_t size() const;
  /// Value r as a double (Int64 and Float64 columns; throws for String).
  double number(size_t r) const;
};

/// A table read from a CSV file or an SQLite table: named, typed columns of equal length.
class Table {
 public:
  Table() = default;
  explicit Table(std::vector<Column> columns, std::string source = "");
  size_t num_rows() const { return columns_.empty() ? 0 : columns_[0].size(); }
  size_t num_columns() const { return columns_.size(); }
  const std::vector<Column>& columns() const { return columns_; }
  std::vector<std::string> names() const;
  /// The column called `name`; throws kiln::Error listing the columns when there is none.
  const Column& column(const std::string& name) const;
  /// The numeric columns `names` (empty: every column) as [rows, k] in `dtype` (f32, f64, i64...).
  Tensor to_tensor(const std::vector<std::string>& names = {}, DType dtype = f32) const;
  /// The file (and table) the data came from, for messages.
  const std::string& source() const { return source_; }

 private:
  std::vector<Column> columns_;
  std::string source_;
};

/// Options of read_csv.
struct CsvOptions {
  /// Field separator. ' ' splits on runs of spaces and tabs and ignores leading/trailing ones.
  char delimiter = ',';
  /// The first (non-skipped) line holds the column names; without one, `names` gives them or
  /// they are "c0", "c1", ...
  bool header = true;
  /// Lines to skip before the header or the data.
  size_t skip_rows = 0;
  /// Column names when there is no header (must match the number of fields).
  std::vector<std::string> names;
  /// Types by column name; unnamed columns use `default_type`.
  std::map<std::string, ColumnType> types;
  ColumnType default_type = ColumnType::Infer;
};

/// Reads a CSV file (gzip-compressed files are read transparently): RFC 4180 quoting ("a,b",
/// "say ""hi"""), quoted line breaks, \n or \r\n line ends; blank lines are skipped. Throws
/// kiln::Error naming the file and line for ragged rows, unterminated quotes and values that
/// do not parse as the column's type.
Table read_csv(const std::string& path, const CsvOptions& options = {});
/// The same from text in memory; `name` is used in messages.
Table parse_csv(const std::string& text, const CsvOptions& options = {}, const std::string& name = "<string>");

/// Reads a whole SQLite table (or, when `table` starts with SELECT, the rows of that query).
/// Column types come from the values: INTEGER -> Int64, REAL (or integers mixed with reals,
/// or NULLs) -> Float64, TEXT -> String. Throws naming the file for a missing file or table.
Table read_sqlite(const std::string& path, const std::string& table);

/// Options of tabular: which columns are features and which are targets.
struct TabularOptions {
  std::vector<std::string> features;  ///< empty: every column that is not a target
  std::vector<std::string> targets;
  DType feature_dtype = f32;
  DType target_dtype = f32;  ///< i64 for class indices
};
/// A dataset of rows of `table`: features [F] and targets [T]. String columns cannot be used.
DatasetPtr<TabularItem> tabular(const Table& table, const TabularOptions& options);

// ---- image folder -----------------------------------------------------------------------------

/// Options of image_folder.
struct ImageFolderOptions {
  /// File extensions taken (lower case, compared case-insensitively); others are ignored.
  std::vector<std::string> extensions = {".png", ".jpg", ".jpeg"};
};

/// A folder with one sub-folder per class (root/cat/1.png, root/dog/7.jpg, ...). Classes are
/// the sub-folder names sorted; files are sorted by name. Images are decoded on each get() to
/// u8 [C, H, W] (C = 1, 3 or 4 as stored; 16-bit PNGs are reduced to 8 bits).
class ImageFolderDataset : public Dataset<ImageItem> {
 public:
  ImageFolderDataset(const std::string& root, const ImageFolderOptions& options = {});
  size_t size() const override { return files_.size(); }
  ImageItem get(size_t i) const override;
  const std::vector<std::string>& classes() const { return classes_; }
  /// Path of item i.
  const std::string& path(size_t i) const { return files_.at(i); }

 private:
  std::vector<std::string> classes_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
};
std::shared_ptr<ImageFolderDataset> image_folder(const std::string& root, const ImageFolderOptions& options = {});

/// Decodes a PNG or JPEG file (chosen by its signature, not its name) to u8 [C, H, W].
Tensor read_image(const std::string& path);
/// Decodes PNG / JPEG bytes; `name` is used in messages.
Tensor decode_png(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>");
Tensor decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>");
/// Writes u8 [C, H, W] (C = 1, 2, 3 or 4; other dtypes are rounded and clamped to 0..255) as PNG.
void write_png(const std::string& path, const Tensor& image);
/// Writes u8 [C, H, W] (C = 1 or 3) as a baseline JPEG of the given quality (1..100).
void write_jpeg(const std::string& path, const Tensor& image, int quality = 90);

}  // namespace kiln::data
