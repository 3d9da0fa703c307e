# Writes OUTPUT, a C++ source defining tutti::perf::builtCommit(): the short commit checked out in SOURCE_DIR, with
# "-dirty" when tracked files differ from it; "" outside a git checkout (a tarball) or without git.
# The build runs it on every build (cmake -DSOURCE_DIR=... -DOUTPUT=... [-DGIT_EXECUTABLE=...] -P git_commit.cmake), so
# the reports name the commit built, not the one configured. OUTPUT is rewritten only when its text changes: an
# unchanged commit recompiles nothing.
set(commit "")
if(GIT_EXECUTABLE AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE result ERROR_QUIET)
  if(NOT result EQUAL 0)
    set(commit "")
  else()
    # Untracked files are left out, as git describe --dirty does. --no-optional-locks: a build must not take the index
    # lock from a git command the user runs meanwhile.
    execute_process(COMMAND "${GIT_EXECUTABLE}" --no-optional-locks status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE changes RESULT_VARIABLE result ERROR_QUIET)
    if(result EQUAL 0 AND NOT changes STREQUAL "")
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()

string(CONCAT text "// Generated on every build by perf/sweep/git_commit.cmake: the commit of the tree that was built.\n"
                   "#include \"perf/sweep/build_info.h\"\n\n"
                   "const char* tutti::perf::builtCommit() { return \"${commit}\"; }\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
