#include "results/run_columns.h"

namespace seqbench {

namespace {
// A row of the table: `access` is a generic lambda returning the member, `[](auto& r) ->
// auto& { return r.member; }`, which serves both the reading and the writing pointer.
template <typename T, typename Access>
RunColumn Column(const char* name, Access access, bool null_if_empty = false) {
  return {name, RunMember<T>{access, access}, null_if_empty};
}
}  // namespace

const std::vector<RunColumn>& RunColumns() {
  using S = std::string;
  static const std::vector<RunColumn> columns = {
      Column<S>(
          "uuid", [](auto& r) -> auto& { return r.uuid; }),
      Column<S>(
          "suite_name", [](auto& r) -> auto& { return r.suite_name; }),
      Column<S>(
          "suite_path", [](auto& r) -> auto& { return r.suite_path; }),
      Column<S>(
          "suite_text", [](auto& r) -> auto& { return r.suite_text; }),
      Column<S>(
          "suite_hash", [](auto& r) -> auto& { return r.suite_hash; }),
      Column<S>(
          "command_line", [](auto& r) -> auto& { return r.command_line; }),
      Column<S>(
          "shard", [](auto& r) -> auto& { return r.shard; }),
      Column<uint64_t>(
          "seed", [](auto& r) -> auto& { return r.seed; }),
      Column<S>(
          "status", [](auto& r) -> auto& { return r.status; }),
      Column<S>(
          "started_at", [](auto& r) -> auto& { return r.started_at; }),
      Column<S>(
          "finished_at", [](auto& r) -> auto& { return r.finished_at; }, true),
      Column<S>(
          "kind", [](auto& r) -> auto& { return r.kind; }),
      Column<S>(
          "baseline", [](auto& r) -> auto& { return r.baseline; }),
      Column<int64_t>(
          "repetitions", [](auto& r) -> auto& { return r.settings.repetitions; }),
      Column<int64_t>(
          "warmup", [](auto& r) -> auto& { return r.settings.warmup; }),
      Column<double>(
          "min_time_s", [](auto& r) -> auto& { return r.settings.min_time_s; }),
      Column<int64_t>(
          "threads", [](auto& r) -> auto& { return r.threads; }),
      Column<S>(
          "check_policy", [](auto& r) -> auto& { return r.settings.check_policy; }),
      Column<S>(
          "label", [](auto& r) -> auto& { return r.label; }),
      Column<double>(
          "max_noise", [](auto& r) -> auto& { return r.settings.max_noise; }),
      Column<double>(
          "max_time_s", [](auto& r) -> auto& { return r.settings.max_time_s; }),
      Column<S>(
          "run_group", [](auto& r) -> auto& { return r.group; }),
  };
  return columns;
}

std::string RunColumnList() {
  std::string list;
  for (const RunColumn& column : RunColumns()) {
    if (!list.empty()) list += ", ";
    list += column.name;
  }
  return list;
}

}  // namespace seqbench
