// Helpers shared by the unit tests: checking that an op throws kiln::Error with the right text.
#pragma once
#include <gtest/gtest.h>
#include <kiln/error.h>

#include <string>

namespace kiln::test {

/// The message of the kiln::Error that f throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Expects f to throw a kiln::Error whose message starts with "[op]" and contains part.
template <class F>
void expect_error(F&& f, const std::string& op, const std::string& part = "") {
  try {
    f();
    ADD_FAILURE() << "expected an error from " << op;
  } catch (const Error& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("[" + op + "]"), std::string::npos) << w;
    if (!part.empty()) EXPECT_NE(w.find(part), std::string::npos) << w;
  }
}

}  // namespace kiln::test

/// EXPECT_ERROR(statement, "text"): the statement throws a kiln::Error containing the text.
#define EXPECT_ERROR(stmt, needle)                                          \
  do {                                                                      \
    std::string msg_ = ::kiln::test::error_of([&] { stmt; });               \
    EXPECT_NE(msg_.find(needle), std::string::npos) << "message: " << msg_; \
  } while (0)
