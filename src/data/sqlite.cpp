// SPDX-License-Identifier: MIT OR Apache-2.0
// SQLite tables read into a Table (typed columns).
#include <sqlite3.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <memory>

#include "kiln/data/sources.h"

namespace kiln::data {

namespace {
constexpr const char* kSql = "data::read_sqlite";

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct StmtCloser {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};

bool starts_with_select(const std::string& s) {
  size_t i = s.find_first_not_of(" \t\r\n");
  if (i == std::string::npos || s.size() - i < 6) return false;
  std::string w = s.substr(i, 6);
  for (char& c : w) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return w == "SELECT";
}

// A value as read, before the column's type is settled.
struct Cell {
  int type;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL
  int64_t i = 0;
  double d = 0;
  std::string s;
};
}  // namespace

Table read_sqlite(const std::string& path, const std::string& table) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  std::unique_ptr<sqlite3, DbCloser> db(raw);
  KILN_CHECK(rc == SQLITE_OK, kSql, "cannot open '" << path << "': " << (raw ? sqlite3_errmsg(raw) : "out of memory"));
  std::string sql;
  if (starts_with_select(table)) {
    sql = table;
  } else {
    // Quote the table name as an SQL identifier, so any name is read literally.
    std::string q = "\"";
    for (char c : table) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    sql = "SELECT * FROM " + q + "\"";
  }
  sqlite3_stmt* st_raw = nullptr;
  rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st_raw, nullptr);
  std::unique_ptr<sqlite3_stmt, StmtCloser> st(st_raw);
  KILN_CHECK(rc == SQLITE_OK, kSql, "'" << path << "': cannot read '" << table << "': " << sqlite3_errmsg(db.get()));
  const int nc = sqlite3_column_count(st.get());
  std::vector<std::vector<Cell>> cells(static_cast<size_t>(nc));
  for (;;) {
    rc = sqlite3_step(st.get());
    if (rc == SQLITE_DONE) break;
    KILN_CHECK(rc == SQLITE_ROW, kSql,
               "'" << path << "': reading '" << table << "' failed: " << sqlite3_errmsg(db.get()));
    for (int j = 0; j < nc; ++j) {
      Cell c;
      c.type = sqlite3_column_type(st.get(), j);
      if (c.type == SQLITE_INTEGER) c.i = sqlite3_column_int64(st.get(), j);
      if (c.type == SQLITE_FLOAT) c.d = sqlite3_column_double(st.get(), j);
      if (c.type == SQLITE_TEXT) {
        const unsigned char* t = sqlite3_column_text(st.get(), j);
        c.s = t ? reinterpret_cast<const char*>(t) : "";
      }
      KILN_CHECK(c.type != SQLITE_BLOB, kSql,
                 "'" << path << "': column '" << sqlite3_column_name(st.get(), j) << "' of '" << table
                     << "' holds a BLOB, which a Table cannot hold");
      cells[static_cast<size_t>(j)].push_back(std::move(c));
    }
  }
  std::vector<Column> cols(static_cast<size_t>(nc));
  for (int j = 0; j < nc; ++j) {
    Column& col = cols[static_cast<size_t>(j)];
    const auto& cs = cells[static_cast<size_t>(j)];
    col.name = sqlite3_column_name(st.get(), j);
    bool any_text = false, any_float = false, any_null = false;
    for (const Cell& c : cs) {
      any_text |= c.type == SQLITE_TEXT;
      any_float |= c.type == SQLITE_FLOAT;
      any_null |= c.type == SQLITE_NULL;
    }
    if (any_text) {
      col.type = ColumnType::String;
      for (const Cell& c : cs)
        col.strings.push_back(c.type == SQLITE_TEXT      ? c.s
                              : c.type == SQLITE_INTEGER ? std::to_string(c.i)
                              : c.type == SQLITE_FLOAT   ? std::to_string(c.d)
                                                         : std::string());
    } else if (any_float || any_null) {
      col.type = ColumnType::Float64;
      for (const Cell& c : cs)
        col.floats.push_back(c.type == SQLITE_INTEGER ? static_cast<double>(c.i)
                             : c.type == SQLITE_FLOAT ? c.d
                                                      : std::numeric_limits<double>::quiet_NaN());
    } else {
      col.type = ColumnType::Int64;
      for (const Cell& c : cs) col.ints.push_back(c.i);
    }
  }
  return Table(std::move(cols), path + ":" + table);
}

}  // namespace kiln::data
