# Fails when a checked-in generated file differs from what its generator prints now:
#   cmake -DGENERATOR="tool;--flag" -DFILE=docs/page.md -DREGENERATE="how to regenerate" -P check_generated_file.cmake
# On a difference it names the first line that differs and says how to regenerate the file.
cmake_minimum_required(VERSION 3.25)  # while(TRUE) and the policies of the build

execute_process(COMMAND ${GENERATOR} OUTPUT_VARIABLE generated RESULT_VARIABLE status ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${GENERATOR} failed (${status}): ${errors}")
endif()
if(NOT EXISTS ${FILE})
  message(FATAL_ERROR "${FILE} is missing; generate it with:\n  ${REGENERATE}")
endif()
file(READ ${FILE} checked_in)
if(checked_in STREQUAL generated)
  message(STATUS "${FILE} is up to date")
  return()
endif()

# The first differing line, so the failure says what changed without a diff tool. (Walked with
# string(FIND), not as CMake lists, which would split the text at every ';'.)
set(line_number 1)
while(TRUE)
  string(FIND "${generated}" "\n" generated_end)
  string(FIND "${checked_in}" "\n" checked_in_end)
  string(SUBSTRING "${generated}" 0 ${generated_end} want)
  string(SUBSTRING "${checked_in}" 0 ${checked_in_end} have)
  if(NOT want STREQUAL have OR generated_end EQUAL -1 OR checked_in_end EQUAL -1)
    break()
  endif()
  math(EXPR generated_end "${generated_end} + 1")
  math(EXPR checked_in_end "${checked_in_end} + 1")
  string(SUBSTRING "${generated}" ${generated_end} -1 generated)
  string(SUBSTRING "${checked_in}" ${checked_in_end} -1 checked_in)
  math(EXPR line_number "${line_number} + 1")
endwhile()
if(want STREQUAL have)  # the same text; one of them lacks the final newline
  if(generated_end EQUAL -1)
    string(APPEND want " (no newline at the end)")
  else()
    string(APPEND have " (no newline at the end)")
  endif()
elseif(want STREQUAL "" AND generated_end EQUAL -1)
  set(want "(end of output)")
endif()
if(have STREQUAL "" AND checked_in_end EQUAL -1)
  set(have "(end of file)")
endif()
message(FATAL_ERROR "${FILE} differs from what the generator prints now (first at line ${line_number}):\n"
                    "  file:      ${have}\n  generated: ${want}\n"
                    "Regenerate it and commit the result:\n  ${REGENERATE}")
