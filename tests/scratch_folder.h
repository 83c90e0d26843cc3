// ScratchFolder: a private folder for one test's files (databases, pipes, scripts), made
// under the temporary directory and removed with everything in it when the test is done.
//
// Thread-safety: one owner; the folder is the test's alone.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "base/files.h"

namespace seqbench::testing {

class ScratchFolder {
 public:
  // Makes `prefix-XXXXXX` in the temporary directory; throws std::runtime_error if it cannot.
  explicit ScratchFolder(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    path_ = pattern;
  }
  ~ScratchFolder() { RemoveTree(path_); }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace seqbench::testing
