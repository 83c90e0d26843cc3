# Run at every build (cmake -P): records the source tree's git SHA and whether it was
# dirty into git_info.h, rewriting the header only when they change. Published result
# databases are data, not code: writing a run into one must not make the next build dirty.
execute_process(COMMAND git rev-parse HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  set(sha "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no -- . ":(exclude)results/published"
                WORKING_DIRECTORY "${SOURCE_DIR}"
                OUTPUT_VARIABLE changes ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  set(dirty "unknown")
elseif(changes STREQUAL "")
  set(dirty "false")
else()
  set(dirty "true")
endif()
set(content "#pragma once\n#define SEQBENCH_GIT_SHA \"${sha}\"\n#define SEQBENCH_GIT_DIRTY \"${dirty}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUTPUT}" "${content}")
endif()
