// SPDX-License-Identifier: MIT OR Apache-2.0
// Tables: the CSV parser, typed columns, and the tabular dataset of table rows.
#include <charconv>
#include <cmath>
#include <limits>

#include "data/io_util.h"
#include "kiln/data/sources.h"
#include "kiln/ops.h"

namespace kiln::data {

std::string to_string(ColumnType t) {
  switch (t) {
    case ColumnType::Infer:
      return "infer";
    case ColumnType::Int64:
      return "int64";
    case ColumnType::Float64:
      return "float64";
    case ColumnType::String:
      return "string";
  }
  return "?";
}

size_t Column::size() const {
  switch (type) {
    case ColumnType::Int64:
      return ints.size();
    case ColumnType::String:
      return strings.size();
    default:
      return floats.size();
  }
}

double Column::number(size_t r) const {
  KILN_CHECK(type != ColumnType::String, "data::Column", "column '" << name << "' holds strings, not numbers");
  KILN_CHECK(r < size(), "data::Column",
             "row " << static_cast<long long>(r) << " out of range for column '" << name << "' of "
                    << static_cast<long long>(size()) << " rows");
  return type == ColumnType::Int64 ? static_cast<double>(ints[r]) : floats[r];
}

Table::Table(std::vector<Column> columns, std::string source)
    : columns_(std::move(columns)), source_(std::move(source)) {
  for (const auto& c : columns_)
    KILN_CHECK(c.size() == columns_[0].size(), "data::Table",
               "column '" << c.name << "' has " << static_cast<long long>(c.size()) << " rows, column '"
                          << columns_[0].name << "' has " << static_cast<long long>(columns_[0].size()));
}

std::vector<std::string> Table::names() const {
  std::vector<std::string> n;
  for (const auto& c : columns_) n.push_back(c.name);
  return n;
}

const Column& Table::column(const std::string& name) const {
  for (const auto& c : columns_)
    if (c.name == name) return c;
  std::string all;
  for (const auto& c : columns_) all += (all.empty() ? "" : ", ") + c.name;
  KILN_CHECK(false, "data::Table",
             (source_.empty() ? "" : "'" + source_ + "': ") << "no column '" << name << "' (columns: " << all << ")");
  return columns_[0];
}

Tensor Table::to_tensor(const std::vector<std::string>& names, DType dtype) const {
  std::vector<const Column*> cols;
  if (names.empty())
    for (const auto& c : columns_) cols.push_back(&c);
  else
    for (const auto& n : names) cols.push_back(&column(n));
  const size_t rows = num_rows(), k = cols.size();
  for (const Column* c : cols)
    KILN_CHECK(c->type != ColumnType::String, "data::Table",
               (source_.empty() ? "" : "'" + source_ + "': ") << "column '" << c->name << "' holds strings");
  std::vector<double> v(rows * k);
  for (size_t j = 0; j < k; ++j)
    for (size_t r = 0; r < rows; ++r) v[r * k + j] = cols[j]->number(r);
  return from_blob_copy(v.data(), Shape{static_cast<int64_t>(rows), static_cast<int64_t>(k)}, f64, Device::cpu())
      .to(dtype);
}

// ---- CSV ------------------------------------------------------------------------------------------

namespace {

constexpr const char* kCsv = "data::read_csv";

struct Record {
  size_t line;  // 1-based line where the record starts
  std::vector<std::string> fields;
};

// Splits text into records (RFC 4180 quoting). Whitespace mode (delimiter ' ') splits on runs of
// spaces and tabs and ignores leading and trailing ones.
std::vector<Record> tokenize(const std::string& text, char delim, size_t skip_rows, const std::string& name) {
  std::vector<Record> out;
  const bool ws = delim == ' ';
  size_t i = 0, line = 1;
  const size_t n = text.size();
  // Skip lines.
  while (skip_rows > 0 && i < n) {
    while (i < n && text[i] != '\n') ++i;
    if (i < n) ++i;
    ++line;
    --skip_rows;
  }
  while (i < n) {
    Record rec;
    rec.line = line;
    std::string field;
    bool field_started = false;  // whitespace mode: a field has begun
    bool quoted_any = false;
    for (;;) {
      if (i >= n || text[i] == '\n' || (text[i] == '\r' && (i + 1 >= n || text[i + 1] == '\n'))) {
        if (!ws || field_started) rec.fields.push_back(std::move(field));
        if (i < n) {
          i += text[i] == '\r' ? 2 : 1;
          ++line;
        }
        break;
      }
      char c = text[i];
      if (c == '"') {
        KILN_CHECK(field.find_first_not_of(" \t") == std::string::npos, kCsv,
                   "'" << name << "' line " << static_cast<long long>(line)
                       << ": a quote inside an unquoted field (quote the whole field and double inner quotes)");
        field.clear();
        size_t start_line = line;
        ++i;
        for (;;) {
          KILN_CHECK(i < n, kCsv,
                     "'" << name << "' line " << static_cast<long long>(start_line) << ": unterminated quoted field");
          if (text[i] == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (text[i] == '\n') ++line;
          field += text[i++];
        }
        // After the closing quote: spaces, then a delimiter or the line end.
        while (i < n && (text[i] == ' ' || text[i] == '\t') && !(ws)) ++i;
        KILN_CHECK(i >= n || text[i] == delim || text[i] == '\n' || text[i] == '\r' ||
                       (ws && (text[i] == ' ' || text[i] == '\t')),
                   kCsv, "'" << name << "' line " << static_cast<long long>(line) << ": text after a closing quote");
        field_started = true;
        quoted_any = true;
        continue;
      }
      if (ws && (c == ' ' || c == '\t')) {
        if (field_started) {
          rec.fields.push_back(std::move(field));
          field.clear();
          field_started = false;
        }
        ++i;
        continue;
      }
      if (!ws && c == delim) {
        rec.fields.push_back(std::move(field));
        field.clear();
        ++i;
        continue;
      }
      field += c;
      field_started = true;
      ++i;
    }
    bool blank = rec.fields.empty() || (rec.fields.size() == 1 && !quoted_any &&
                                        rec.fields[0].find_first_not_of(" \t\r") == std::string::npos);
    if (!blank) out.push_back(std::move(rec));
  }
  return out;
}

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool parse_int(std::string_view s, int64_t& v) {
  s = trim(s);
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_float(std::string_view s, double& v) {
  s = trim(s);
  if (s.empty()) {
    v = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s[0] == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves v unchanged on overflow/underflow; fall back to strtod's saturation.
    v = std::strtod(std::string(s).c_str(), nullptr);
    return true;
  }
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

Table parse_csv(const std::string& text, const CsvOptions& options, const std::string& name) {
  std::vector<Record> recs = tokenize(text, options.delimiter, options.skip_rows, name);
  std::vector<std::string> names;
  size_t first = 0;
  if (options.header) {
    KILN_CHECK(!recs.empty(), kCsv, "'" << name << "': no header line");
    for (auto& f : recs[0].fields) names.emplace_back(trim(f));
    first = 1;
  } else if (!options.names.empty()) {
    names = options.names;
  } else {
    size_t nf = recs.empty() ? 0 : recs[0].fields.size();
    for (size_t j = 0; j < nf; ++j) names.push_back("c" + std::to_string(j));
  }
  const size_t nc = names.size();
  for (size_t r = first; r < recs.size(); ++r)
    KILN_CHECK(recs[r].fields.size() == nc, kCsv,
               "'" << name << "' line " << static_cast<long long>(recs[r].line) << ": "
                   << static_cast<long long>(recs[r].fields.size()) << " fields, expected "
                   << static_cast<long long>(nc) << (options.header ? " (as in the header)" : ""));
  for (const auto& [col, ty] : options.types) {
    bool found = false;
    for (const auto& n : names) found |= n == col;
    KILN_CHECK(found, kCsv, "'" << name << "': a type is given for column '" << col << "', which does not exist");
  }
  std::vector<Column> cols(nc);
  for (size_t j = 0; j < nc; ++j) {
    Column& c = cols[j];
    c.name = names[j];
    auto it = options.types.find(c.name);
    ColumnType ty = it != options.types.end() ? it->second : options.default_type;
    if (ty == ColumnType::Infer) {
      bool all_int = true, all_num = true;
      for (size_t r = first; r < recs.size() && all_num; ++r) {
        int64_t iv;
        double dv;
        const std::string& f = recs[r].fields[j];
        if (all_int && !parse_int(f, iv)) all_int = false;
        if (!all_int && !parse_float(f, dv)) all_num = false;
      }
      ty = all_int ? ColumnType::Int64 : all_num ? ColumnType::Float64 : ColumnType::String;
    }
    c.type = ty;
    for (size_t r = first; r < recs.size(); ++r) {
      const std::string& f = recs[r].fields[j];
      if (ty == ColumnType::Int64) {
        int64_t v = 0;
        KILN_CHECK(parse_int(f, v), kCsv,
                   "'" << name << "' line " << static_cast<long long>(recs[r].line) << ", column '" << c.name
                       << "': cannot parse '" << f << "' as an integer");
        c.ints.push_back(v);
      } else if (ty == ColumnType::Float64) {
        double v = 0;
        KILN_CHECK(parse_float(f, v), kCsv,
                   "'" << name << "' line " << static_cast<long long>(recs[r].line) << ", column '" << c.name
                       << "': cannot parse '" << f << "' as a number");
        c.floats.push_back(v);
      } else {
        c.strings.push_back(f);
      }
    }
  }
  return Table(std::move(cols), name);
}

Table read_csv(const std::string& path, const CsvOptions& options) {
  std::vector<uint8_t> bytes = io::read_file(path, kCsv);
  return parse_csv(std::string(bytes.begin(), bytes.end()), options, path);
}

// ---- tabular dataset -----------------------------------------------------------------------------

namespace {
class TabularDataset : public Dataset<TabularItem> {
 public:
  TabularDataset(Tensor features, Tensor targets) : f_(std::move(features)), t_(std::move(targets)) {}
  size_t size() const override { return static_cast<size_t>(f_.size(0)); }
  TabularItem get(size_t i) const override {
    detail::check_index(i, size(), "data::tabular");
    return {f_.select(0, static_cast<int64_t>(i)), t_.select(0, static_cast<int64_t>(i))};
  }

 private:
  Tensor f_, t_;
};
}  // namespace

DatasetPtr<TabularItem> tabular(const Table& table, const TabularOptions& options) {
  std::vector<std::string> feats = options.features;
  if (feats.empty()) {
    for (const auto& n : table.names()) {
      bool is_target = false;
      for (const auto& t : options.targets) is_target |= t == n;
      if (!is_target) feats.push_back(n);
    }
  }
  Tensor f = table.to_tensor(feats, options.feature_dtype);
  Tensor t = options.targets.empty() ? zeros({static_cast<int64_t>(table.num_rows()), 0},
                                             {.dtype = options.target_dtype, .device = Device::cpu()})
                                     : table.to_tensor(options.targets, options.target_dtype);
  return std::make_shared<TabularDataset>(std::move(f), std::move(t));
}

}  // namespace kiln::data
