// The runs table's columns, one row each: the column's name and the RunRecord member it
// stores. Store::CreateRun's INSERT and every SELECT of runs are built from this table,
// so a new run column is one migration (results/store.cc) and one row here, and the
// INSERT's and the reader's positions cannot disagree.
//
// Thread-safety: a constant table built on first use; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "results/store.h"

namespace seqbench {

// A RunRecord member of type T, read through `get` and written through `set`.
template <typename T>
struct RunMember {
  const T& (*get)(const RunRecord&);
  T& (*set)(RunRecord&);
};

struct RunColumn {
  const char* name;
  std::variant<RunMember<std::string>, RunMember<int64_t>, RunMember<uint64_t>, RunMember<double>>
      member;
  bool null_if_empty = false;  // an empty string is stored as NULL (finished_at)
};

// Every column of `runs` but run_id, in the order of the table's definition.
const std::vector<RunColumn>& RunColumns();

// "uuid, suite_name, ...": the names of RunColumns(), for SQL.
std::string RunColumnList();

}  // namespace seqbench
