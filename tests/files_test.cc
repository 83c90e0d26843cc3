// Writing outputs: whole or not at all (a write that fails midway, simulated by a file-size
// limit, leaves the old file and no temporary), never through a symlink (at the target or
// at the temporary name seqbench used to use), never over the database or its -wal/-shm.
#include "base/files.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace seqbench {
namespace {
namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh folder per test, removed afterwards.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    RemoveTree(path.string());
    fs::create_directories(path);
  }
  ~Folder() { RemoveTree(path.string()); }
  size_t Entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path), {}));
  }
};

TEST_CASE("an output is written whole, replacing the old file and keeping its mode",
          "[integrity]") {
  Folder folder("seqbench_output");
  const fs::path out = folder.path / "report.md";
  WriteFileAtomically(out.string(), "first\n");
  CHECK(Slurp(out) == "first\n");
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  WriteFileAtomically(out.string(), std::string(100000, 'x'));
  CHECK(Slurp(out) == std::string(100000, 'x'));
  CHECK((fs::status(out).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  CHECK(folder.Entries() == 1);  // no temporary left beside it
  WriteFileAtomically(out.string(), "");
  CHECK(fs::file_size(out) == 0);
}

TEST_CASE("an output never goes through a symlink", "[integrity]") {
  Folder folder("seqbench_output_links");
  const fs::path victim = folder.path / "victim.txt";
  std::ofstream(victim) << "precious\n";
  // A link at the output path itself is refused, and both stay as they were.
  const fs::path link = folder.path / "plot.svg";
  fs::create_symlink(victim, link);
  CHECK_THROWS_AS(WriteFileAtomically(link.string(), "<svg/>"), OutputRefused);
  CHECK(fs::is_symlink(link));
  CHECK(Slurp(victim) == "precious\n");
  // A link planted at the temporary name seqbench used to write (OUTPUT.seqbench-tmp), and
  // one at a dot-name like today's: the temporary is created exclusively, never through them.
  const fs::path out = folder.path / "p.svg";
  fs::create_symlink(victim, folder.path / "p.svg.seqbench-tmp");
  fs::create_symlink(victim, folder.path / ".p.svg.seqbench-XXXXXX");
  WriteFileAtomically(out.string(), "<svg/>");
  CHECK(Slurp(out) == "<svg/>");
  CHECK(Slurp(victim) == "precious\n");
  // A directory is no output either.
  fs::create_directory(folder.path / "dir.md");
  CHECK_THROWS_AS(WriteFileAtomically((folder.path / "dir.md").string(), "x"), OutputRefused);
}

TEST_CASE("a killed writer's temporary is removed by the next write, a live one's is not",
          "[integrity]") {
  Folder folder("seqbench_output_orphans");
  const fs::path out = folder.path / "table.md";
  // A child that exits at once: its pid is surely gone when the write looks.
  const pid_t dead = fork();
  REQUIRE(dead >= 0);
  if (dead == 0) _exit(0);
  REQUIRE(waitpid(dead, nullptr, 0) == dead);
  const std::string prefix = ".table.md.seqbench-";
  const fs::path orphan = folder.path / (prefix + std::to_string(dead) + "-a1B2c3");
  const fs::path live = folder.path / (prefix + std::to_string(getpid()) + "-d4E5f6");
  const fs::path other = folder.path / (".other.md.seqbench-" + std::to_string(dead) + "-a1B2c3");
  const fs::path odd = folder.path / (prefix + std::to_string(dead) + "-toolong7");
  for (const fs::path& file : {orphan, live, other, odd}) std::ofstream(file) << "half";
  const fs::path victim = folder.path / "victim.txt";
  std::ofstream(victim) << "precious\n";
  const fs::path linked = folder.path / (prefix + std::to_string(dead) + "-g7H8i9");
  fs::create_symlink(victim, linked);
  WriteFileAtomically(out.string(), "whole\n");
  CHECK(Slurp(out) == "whole\n");
  CHECK_FALSE(fs::exists(orphan));  // the dead writer's
  CHECK(fs::exists(live));          // a writer still running (this process)
  CHECK(fs::exists(other));         // another target's
  CHECK(fs::exists(odd));           // not a name seqbench makes
  CHECK(fs::is_symlink(linked));    // not a regular file: never touched
  CHECK(Slurp(victim) == "precious\n");
}

TEST_CASE("a write that fails midway leaves the old file and no temporary", "[integrity]") {
  // A file-size limit of 1000 bytes makes write() fail with EFBIG past it, as a full disk
  // fails with ENOSPC: in a child process, so that the limit binds nothing else.
  Folder folder("seqbench_output_full");
  const fs::path out = folder.path / "README.md";
  const std::string old_text = "# Title\n<!-- seqbench:begin -->\n| a |\n<!-- seqbench:end -->\n";
  std::ofstream(out) << old_text;
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1000, 1000};
    setrlimit(RLIMIT_FSIZE, &limit);
    try {
      WriteFileAtomically(out.string(), std::string(5000, 'y'));
    } catch (const std::runtime_error& error) {
      _exit(std::string(error.what()).find("cannot write") != std::string::npos ? 0 : 3);
    }
    _exit(4);  // no error: the limit did not bind
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(Slurp(out) == old_text);
  CHECK(folder.Entries() == 1);
}

TEST_CASE("an output is refused where it is the database or a file SQLite keeps for it",
          "[integrity]") {
  Folder folder("seqbench_output_db");
  const fs::path db = folder.path / "results.db";
  std::ofstream(db) << "SQLite format 3";
  const std::string d = db.string();
  CHECK_THROWS_AS(RefuseDatabaseOutput(d, d), OutputRefused);
  CHECK_THROWS_AS(RefuseDatabaseOutput((folder.path / "x/../results.db").string(), d),
                  OutputRefused);
  CHECK_THROWS_AS(RefuseDatabaseOutput(d + "-wal", d), OutputRefused);  // before it exists
  CHECK_THROWS_AS(RefuseDatabaseOutput(d + "-shm", d), OutputRefused);
  CHECK_THROWS_AS(RefuseDatabaseOutput(d + "-journal", d), OutputRefused);
  fs::create_symlink(db, folder.path / "alias.md");
  CHECK_THROWS_AS(RefuseDatabaseOutput((folder.path / "alias.md").string(), d), OutputRefused);
  CHECK_NOTHROW(RefuseDatabaseOutput((folder.path / "report.md").string(), d));
  CHECK_NOTHROW(RefuseDatabaseOutput("-", d));
  CHECK_NOTHROW(RefuseDatabaseOutput("", d));
}

TEST_CASE("a tree is removed whole, never through its links", "[integrity]") {
  Folder outside("seqbench_tree_outside");
  std::ofstream(outside.path / "victim.txt") << "precious\n";
  const fs::path tree = fs::temp_directory_path() / ("seqbench_tree_" + std::to_string(getpid()));
  fs::create_directories(tree / "a" / "b");
  std::ofstream(tree / "a" / "b" / "file.txt") << "x";
  std::ofstream(tree / "top.txt") << "y";
  fs::create_symlink(outside.path / "victim.txt", tree / "a" / "file_link");
  fs::create_directory_symlink(outside.path, tree / "a" / "b" / "folder_link");
  CHECK(RemoveTree(tree.string()));
  CHECK_FALSE(fs::exists(fs::symlink_status(tree)));
  CHECK(Slurp(outside.path / "victim.txt") == "precious\n");
  CHECK(outside.Entries() == 1);
  CHECK(RemoveTree(tree.string()));  // already gone: nothing to do
}

}  // namespace
}  // namespace seqbench
