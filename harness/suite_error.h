// SuiteError: a problem in a file the user wrote (benchmark suite, training suite), with
// where it is. what() reads "path:line:column: message", the format compilers use, so
// editors can jump to it; the command line turns it into exit code 2.
//
// Thread-safety: an immutable value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace seqbench {

class SuiteError : public std::runtime_error {
 public:
  SuiteError(std::string path, int64_t line, int64_t column, const std::string& message)
      : std::runtime_error(path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                           message),
        path_(std::move(path)),
        line_(line),
        column_(column),
        message_(message) {}
  const std::string& path() const { return path_; }
  int64_t line() const { return line_; }
  int64_t column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  std::string path_;
  int64_t line_, column_;
  std::string message_;
};

}  // namespace seqbench
