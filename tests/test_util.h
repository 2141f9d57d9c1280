// Helpers shared by the unit tests: checking that an op throws kiln::Error with the right text.
#pragma once
#include <gtest/gtest.h>
#include <kiln/device.h>
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

/// Runs f with the intra-op thread count set to n and restores the previous count, also when
/// f throws. Used to check that results do not depend on the thread count.
template <class F>
auto with_threads(int n, F&& f) {
  struct Restore {
    int saved = num_threads();
    ~Restore() { set_num_threads(saved); }
  } restore;
  set_num_threads(n);
  return f();
}

}  // namespace kiln::test

/// EXPECT_ERROR(statement, "text"): the statement throws a kiln::Error containing the text.
#define EXPECT_ERROR(stmt, needle)                                          \
  do {                                                                      \
    std::string msg_ = ::kiln::test::error_of([&] { stmt; });               \
    EXPECT_NE(msg_.find(needle), std::string::npos) << "message: " << msg_; \
  } while (0)
