// A comparison as one pull-request comment (`compare --format pr`, ci/gate --report), as
// CodSpeed posts one: GitHub-flavoured Markdown whose first line is the verdict, then how
// many cases regressed, improved and stayed, a table of the moved cases (instructions with
// their range, time as advice, memory), the functions that moved in each, and every case
// in a collapsed <details>. User text (case keys, function names) is escaped; the comment
// stays under GitHub's 65,536-character limit, cut at a section or row with a line saying
// so.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "reports/compare.h"

namespace seqbench {

// GitHub refuses a comment body longer than this (characters; counted here as bytes,
// which is never fewer).
inline constexpr size_t kPullRequestCommentLimit = 65536;

// What the comment says of the two runs, beside their comparisons.
struct PullRequestContext {
  std::string base_name, new_name;  // RunName of each run
  std::string suite;
  Gate gate = Gate::kCounts;
  double threshold = 0.05, count_threshold = 0.01;
  bool counted = false;            // both runs counted instructions
  std::vector<std::string> notes;  // what the reader is warned of
};

// How the gate sorted the cases.
struct PullRequestTally {
  int regressed = 0, improved = 0, ambiguous = 0, unchanged = 0, only_new = 0, only_base = 0;
};
// A case regressed (IsRegression), improved (fewer instructions under a counts gate,
// faster under a time gate, either under both; or smaller), has an ambiguous count (the
// moved table lists it too), is only on one side, or else stayed.
PullRequestTally TallyForPullRequest(const std::vector<CaseComparison>& comparisons, Gate gate);

// The comment, at most `limit` bytes.
std::string RenderPullRequestComment(const PullRequestContext& context,
                                     const std::vector<CaseComparison>& comparisons,
                                     size_t limit = kPullRequestCommentLimit);

}  // namespace seqbench
